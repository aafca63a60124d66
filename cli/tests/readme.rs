//! The command line's page, docs/cli.md, shows the exit codes `rlock --help`
//! prints, word for word.

use std::process::Command;

#[test]
fn the_cli_page_shows_the_exit_status_table_that_rlock_help_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_rlock"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let at = help
        .find("Exit status:")
        .expect("rlock --help shows the exit codes");
    let table = help[at..].trim_end();
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md")).unwrap();
    assert!(
        page.contains(table),
        "docs/cli.md lacks the exit-status table `rlock --help` prints:\n{table}"
    );
}
