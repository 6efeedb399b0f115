//! The container files cannot be built here (no Docker engine); these
//! checks keep them parseable and consistent with the binary.
//! Nothing here depends on the storage backend.

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
fn compose_profile_replicas_runs_postgres_and_two_replicas_healthy_only_when_ready() {
    let compose: Value = serde_yaml::from_str(&read("docker-compose.yml")).unwrap();
    let services = &compose["services"];
    assert!(
        services["engram"].get("profiles").is_none(),
        "the one-process service stays the default"
    );
    let postgres = &services["postgres"];
    assert_eq!(postgres["profiles"][0], "replicas");
    assert!(postgres["image"].as_str().unwrap().starts_with("postgres:"));
    assert_eq!(postgres["healthcheck"]["test"][1], "pg_isready");
    let mut ports = Vec::new();
    for name in ["engram-a", "engram-b"] {
        let replica = &services[name];
        assert_eq!(replica["profiles"][0], "replicas", "{name}");
        assert_eq!(replica["build"], ".");
        assert_eq!(
            replica["depends_on"]["postgres"]["condition"], "service_healthy",
            "{name}"
        );
        let environment = &replica["environment"];
        assert_eq!(environment["ENGRAM_STORE__BACKEND"], "postgres", "{name}");
        let url = environment["DATABASE_URL"].as_str().unwrap();
        assert!(
            url.starts_with("postgres://") && url.contains("${ENGRAM_DB_PASSWORD}@postgres:"),
            "{name}: the password comes from the environment: {url}"
        );
        assert!(
            environment["ENGRAM_API_KEY"]
                .as_str()
                .unwrap()
                .starts_with("${ENGRAM_API_KEY"),
            "{name}"
        );
        assert_eq!(
            replica["healthcheck"]["test"],
            serde_json::json!(["CMD", "engram", "healthcheck", "--ready"]),
            "{name}"
        );
        let volume = replica["volumes"][0].as_str().unwrap();
        let (volume, _) = volume.split_once(':').unwrap();
        assert!(
            compose["volumes"].as_object().unwrap().contains_key(volume),
            "{name}: {volume}"
        );
        ports.push(replica["ports"][0].clone());
    }
    assert_ne!(ports[0], ports[1], "the replicas publish different ports");
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
