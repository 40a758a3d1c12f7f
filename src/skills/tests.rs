//! Tests of the skill catalog: precedence, gating, the prompt XML, always-skills and hot reload.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::skills::catalog::*;

/// An environment with the real PATH and the given variables only.
fn env(vars: &[(&str, &str)]) -> EnvLookup {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |name| {
        if name == "PATH" {
            return std::env::var("PATH").ok();
        }
        vars.get(name).cloned()
    })
}

fn write_skill(dir: &Path, name: &str, frontmatter: &str, body: &str) -> PathBuf {
    let path = dir.join(name).join(SKILL_FILE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("---\n{frontmatter}\n---\n{body}")).unwrap();
    path
}

fn catalog(dirs: &[&Path], vars: &[(&str, &str)], ttl: Duration) -> SkillCatalog {
    SkillCatalog::with_options(
        dirs.iter().map(|d| d.to_path_buf()).collect(),
        env(vars),
        ttl,
    )
}

fn find<'a>(skills: &'a [Skill], name: &str) -> &'a Skill {
    skills.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn precedence_is_extra_then_workspace_then_bundled_by_directory_name() {
    let root = tempfile::tempdir().unwrap();
    let (extra, workspace, bundled) = (
        root.path().join("extra"),
        root.path().join("ws"),
        root.path().join("bundled"),
    );
    let dirs = search_dirs(std::slice::from_ref(&extra), &workspace, &bundled);
    let ws_skills = workspace.join("skills");
    for (dir, label) in [
        (&extra, "extra"),
        (&ws_skills, "workspace"),
        (&bundled, "bundled"),
    ] {
        write_skill(dir, "a", &format!("description: a from {label}"), "");
    }
    write_skill(&ws_skills, "b", "description: b from workspace", "");
    write_skill(&bundled, "b", "description: b from bundled", "");
    write_skill(&bundled, "c", "description: c from bundled", "");
    // A broken override is skipped, so the next one of that name is used.
    write_skill(&extra, "c", "description: [broken", "");
    let catalog = SkillCatalog::with_options(dirs, env(&[]), DEFAULT_TTL);
    let skills = catalog.skills();
    let got: Vec<(&str, &str)> = skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", "a from extra"),
            ("b", "b from workspace"),
            ("c", "c from bundled")
        ]
    );
    assert_eq!(
        find(&skills, "a").location,
        extra.join("a").join(SKILL_FILE)
    );
}

#[test]
fn missing_frontmatter_skips_the_skill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain").join(SKILL_FILE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "# No frontmatter\n").unwrap();
    write_skill(dir.path(), "ok", "description: fine", "");
    let skills = catalog(&[dir.path()], &[], DEFAULT_TTL).skills();
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].name, "ok");
}

#[test]
fn gating_by_bins_and_env() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "has-sh",
        "description: x\nrequires:\n  bins: [sh]",
        "",
    );
    write_skill(
        dir.path(),
        "no-bin",
        "description: x\nrequires:\n  bins: [sh, squidbot-no-such-bin-4711]",
        "",
    );
    write_skill(
        dir.path(),
        "env",
        "description: x\nrequires:\n  env: [SQUIDBOT_TEST_SET, SQUIDBOT_TEST_EMPTY, SQUIDBOT_TEST_UNSET]",
        "",
    );
    write_skill(
        dir.path(),
        "env-ok",
        "description: x\nrequires:\n  env: [SQUIDBOT_TEST_SET]",
        "",
    );
    let vars = [("SQUIDBOT_TEST_SET", "1"), ("SQUIDBOT_TEST_EMPTY", "")];
    let skills = catalog(&[dir.path()], &vars, DEFAULT_TTL).skills();
    assert!(find(&skills, "has-sh").available());
    let no_bin = find(&skills, "no-bin");
    assert!(!no_bin.available());
    assert_eq!(no_bin.missing_bins, ["squidbot-no-such-bin-4711"]);
    let env = find(&skills, "env");
    assert_eq!(
        env.missing_env,
        ["SQUIDBOT_TEST_EMPTY", "SQUIDBOT_TEST_UNSET"]
    );
    assert_eq!(requires_text(no_bin), "CLI: squidbot-no-such-bin-4711");
    assert!(find(&skills, "env-ok").available());
}

#[test]
fn always_skills_inline_their_body_without_frontmatter_and_leave_the_xml() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "mem",
        "description: memory\nalways: true",
        "\n# Memory\nUse memory_write.\n",
    );
    write_skill(
        dir.path(),
        "gone",
        "description: gated\nalways: true\nrequires:\n  env: [SQUIDBOT_TEST_UNSET]",
        "Never shown.",
    );
    let location = write_skill(dir.path(), "tool", "description: a tool", "Body.");
    let (xml, always) = catalog(&[dir.path()], &[], DEFAULT_TTL).prompt();
    assert_eq!(always, ["# Memory\nUse memory_write."]);
    assert!(!xml.contains("mem"));
    assert!(!xml.contains("gone"));
    assert!(xml.ends_with(&format!(
        "<skills>\n<skill name=\"tool\" file=\"{}\">a tool</skill>\n</skills>",
        location.display()
    )));
}

#[test]
fn xml_escapes_text_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "x",
        "description: \"Use <b> & 'quotes' \\\"here\\\"\"\nrequires:\n  bins: [squidbot-no-such-bin-4711]\n  env: [SQUIDBOT_TEST_UNSET]",
        "",
    );
    let (xml, _) = catalog(&[dir.path()], &[], DEFAULT_TTL).prompt();
    assert!(xml.contains(
        "requires=\"CLI: squidbot-no-such-bin-4711; env: SQUIDBOT_TEST_UNSET\">Use &lt;b&gt; &amp; &apos;quotes&apos; &quot;here&quot;</skill>"
    ));
}

#[test]
fn no_skills_means_an_empty_section() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog(&[&dir.path().join("missing")], &[], DEFAULT_TTL);
    assert!(catalog.skills().is_empty());
    assert_eq!(catalog.prompt(), (String::new(), Vec::new()));
}

#[test]
fn edits_new_and_deleted_skills_reload_without_a_new_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_skill(dir.path(), "s", "description: old", "");
    let catalog = catalog(&[dir.path()], &[], Duration::ZERO);
    assert_eq!(catalog.skills()[0].description, "old");

    // Same length, so only the modification time reveals the change.
    std::fs::write(&path, "---\ndescription: new\n---\n").unwrap();
    let later = SystemTime::now() + Duration::from_secs(60);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(catalog.skills()[0].description, "new");

    write_skill(dir.path(), "t", "description: added", "");
    assert_eq!(catalog.skills().len(), 2);
    std::fs::remove_dir_all(dir.path().join("s")).unwrap();
    let skills = catalog.skills();
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].name, "t");
}

#[test]
fn listing_is_reused_within_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "s", "description: one", "");
    let catalog = catalog(&[dir.path()], &[], Duration::from_secs(3600));
    assert_eq!(catalog.skills().len(), 1);
    write_skill(dir.path(), "t", "description: two", "");
    assert_eq!(catalog.skills().len(), 1);
}

#[test]
fn frontmatter_name_overrides_the_directory_name() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "dir-name",
        "name: nice-name\ndescription: x",
        "",
    );
    let skills = catalog(&[dir.path()], &[], DEFAULT_TTL).skills();
    assert_eq!(skills[0].name, "nice-name");
}

/// A fresh listing answers without the disk (a turn asks on its own thread); a stale one, or
/// none yet, is left to `prompt`, which scans.
#[test]
fn the_cached_prompt_is_the_fresh_listing_only() {
    let root = tempfile::tempdir().unwrap();
    write_skill(
        root.path(),
        "memo",
        "description: Notes.\nalways: true",
        "Remember.",
    );
    let fresh = catalog(&[root.path()], &[], Duration::from_secs(60));
    assert_eq!(fresh.cached_prompt(), None, "nothing listed yet");
    let listed = fresh.prompt();
    assert_eq!(fresh.cached_prompt(), Some(listed.clone()));
    assert_eq!(listed.1, ["Remember.".to_owned()]);
    let stale = catalog(&[root.path()], &[], Duration::ZERO);
    stale.prompt();
    assert_eq!(
        stale.cached_prompt(),
        None,
        "a listing past its time is scanned again"
    );
}
