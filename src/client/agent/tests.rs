//! The table's entries hold what the commands need of them.

use super::*;
use clap::ValueEnum;

#[test]
fn every_agent_is_listed_once_and_parses_back_by_its_name() {
    for agent in Agent::ALL {
        let named: Vec<Agent> = Agent::ALL
            .into_iter()
            .filter(|other| other.as_str() == agent.as_str())
            .collect();
        assert_eq!(named, vec![agent]);
        assert_eq!(Agent::from_str(agent.as_str(), false), Ok(agent));
    }
}

#[test]
fn every_entry_has_what_its_commands_need() {
    for agent in Agent::ALL {
        let spec = agent.spec();
        assert!(!spec.mcp.is_empty(), "{}: no MCP file", spec.name);
        if let Some(hooks) = &spec.hooks {
            assert!(!hooks.files.is_empty(), "{}: no hooks file", spec.name);
            let names: Vec<&str> = Event::ALL.map(|event| hooks.name(event)).to_vec();
            for (i, name) in names.iter().enumerate() {
                assert!(!names[..i].contains(name), "{}: {name} twice", spec.name);
            }
        } else {
            assert!(
                !spec.instructions.is_empty(),
                "{}: neither hooks nor instructions",
                spec.name
            );
        }
    }
}

#[test]
fn a_place_takes_its_other_name_only_when_that_alone_exists() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = Dirs::new(dir.path(), &|_: &str| None);
    let place = Place {
        base: Base::Project,
        path: "opencode.json",
        or_only: Some("opencode.jsonc"),
    };
    let json = dirs.project.join("opencode.json");
    let jsonc = dirs.project.join("opencode.jsonc");
    assert_eq!(dirs.resolve(&place), Ok(json.clone()));
    std::fs::write(&jsonc, "{}").unwrap();
    assert_eq!(dirs.resolve(&place), Ok(jsonc));
    std::fs::write(&json, "{}").unwrap();
    assert_eq!(dirs.resolve(&place), Ok(json));
    assert_eq!(
        dirs.resolve(&Place::at(Base::Home, ".gemini/settings.json")),
        Err(Missing::Home)
    );
}
