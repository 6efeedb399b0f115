//! What every workload shares: how a run fails, which embedder the
//! service under test runs with, and how the quality workloads weigh its
//! retrieval.

use clap::ValueEnum;
use engram::config::Config;

/// A workload's result: its error is reported and the bench exits non-zero.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Which embedder the service under test uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EmbedderChoice {
    /// The fake upstream that answers at once.
    Fake,
    /// The embedded all-MiniLM-L6-v2.
    Local,
}

/// Expands the match stage's settings into the quality workloads' flags.
macro_rules! weighing {
    ($($(#[doc = $doc:literal])* $name:ident = $default:literal, zero: $zero:literal;)+) => {
        /// The retrieval weights the quality workloads (LoCoMo, LongMemEval,
        /// the semantic set) run the service with; the service's defaults
        /// unless set.
        #[derive(Clone, Copy, Debug, clap::Args)]
        pub struct Weighing {
            $(
                #[arg(
                    long,
                    default_value_t = $default,
                    help = concat!("`retrieval.", stringify!($name), "` (0: ", $zero, ")")
                )]
                pub $name: f64,
            )+
        }

        impl Weighing {
            pub fn apply(self, config: &mut Config) {
                $(config.retrieval.$name = self.$name;)+
            }

            /// The weights as a report label: `lexical_weight 0.8,
            /// conversation_weight 0.3, passage_weight 0.8, feedback_weight
            /// 0.2, min_similarity 0.1`.
            pub fn label(self) -> String {
                [$(format!(concat!(stringify!($name), " {}"), self.$name),)+].join(", ")
            }
        }
    };
}

engram::config::signals::with_match_settings!(weighing);

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// The bench's flags as a command line gives them.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        weighing: Weighing,
    }

    #[test]
    fn the_weights_default_to_the_services_and_a_flag_sets_its_key() {
        let defaults = Flags::parse_from(["bench"]).weighing;
        assert_eq!(
            defaults.label(),
            "lexical_weight 0.8, conversation_weight 0.3, passage_weight 0.8, feedback_weight 0.2, min_similarity 0.1"
        );
        let mut config = Config::default();
        defaults.apply(&mut config);
        assert_eq!(config, Config::default());

        let set = Flags::parse_from(["bench", "--lexical-weight", "0", "--feedback-weight", "0.5"])
            .weighing;
        set.apply(&mut config);
        assert_eq!(config.retrieval.lexical_weight, 0.0);
        assert_eq!(config.retrieval.feedback_weight, 0.5);
        assert_eq!(config.retrieval.passage_weight, 0.8);
        assert_eq!(
            set.label(),
            "lexical_weight 0, conversation_weight 0.3, passage_weight 0.8, feedback_weight 0.5, min_similarity 0.1"
        );
    }

    #[test]
    fn each_flag_says_its_key_and_what_0_does() {
        let help = Flags::command().render_help().to_string();
        for line in [
            "`retrieval.lexical_weight` (0: vector search only) [default: 0.8]",
            "`retrieval.min_similarity` (0: every cosine counts as found) [default: 0.1]",
        ] {
            assert!(help.contains(line), "{help}");
        }
    }
}
