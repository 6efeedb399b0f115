//! The container files cannot be built here (no Docker engine); these
//! checks keep them parseable and consistent with the binary.

use serde_json::Value;

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{}/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn compose_runs_engram_on_a_named_volume_with_the_key_from_the_environment() {
    let compose: Value = serde_yaml::from_str(&read("docker-compose.yml")).unwrap();
    let engram = &compose["services"]["engram"];
    assert_eq!(engram["build"], ".");
    assert_eq!(engram["volumes"][0], "engram-data:/data");
    assert!(
        compose["volumes"]
            .as_object()
            .unwrap()
            .contains_key("engram-data")
    );
    let key = engram["environment"]["ENGRAM_API_KEY"].as_str().unwrap();
    assert!(
        key.starts_with("${ENGRAM_API_KEY"),
        "the key must come from the environment: {key}"
    );
}

#[test]
fn dockerfile_runs_one_binary_as_a_user_with_a_volume_and_a_health_check() {
    let dockerfile = read("Dockerfile");
    for line in [
        "USER engram",
        "VOLUME [\"/data\"]",
        "ENGRAM_DATA_DIR=/data",
        "CMD [\"engram\", \"healthcheck\"]",
        "COPY crates ./crates",
        "COPY --from=build /src/target/release/engram /usr/local/bin/engram",
    ] {
        assert!(dockerfile.contains(line), "Dockerfile lacks {line}");
    }
    assert!(
        !dockerfile.contains("ENGRAM_MODEL_DIR"),
        "the model is inside the binary: nothing to copy beside it"
    );
    assert_eq!(
        dockerfile.matches("\nFROM ").count() + usize::from(dockerfile.starts_with("FROM ")),
        2,
        "multi-stage"
    );
}
