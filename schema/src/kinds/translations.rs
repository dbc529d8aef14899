//! Every kind's translation of the bundled world, as one expected text per kind in
//! `schema/tests/translations/<module>.txt`: for each world object of the kind, in file order,
//! its key, order name and creation time, required parents, links, scopes and index entries
//! (links unresolved), and the record. A change of a translation rule shows as a diff of that
//! file; `UPDATE_EXPECT=1 cargo test -p schema translations` writes the new text to review.

use super::testing::{ctx, world_objects};
use crate::kind::Kind;
use crate::registry::{self, KindVisitor};
use std::fmt::Write;

/// The expected text of kind `K`'s translation of the world.
fn render<K: Kind>() -> String {
    let mut out = String::new();
    for doc in world_objects(K::ID.name()) {
        let m = &doc["metadata"];
        let name = format!("{}/{}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""));
        let cr: K::Cr = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{} {name}: {e}", K::ID.name()));
        writeln!(out, "=== {} {name}", K::ID.name()).unwrap();
        match K::translate(&cr, &ctx()) {
            Err(skip) => writeln!(out, "skipped: {skip}").unwrap(),
            Ok(rec) => {
                writeln!(out, "key: {}", K::key(&rec)).unwrap();
                writeln!(out, "name: {:?}", K::name(&rec)).unwrap();
                writeln!(out, "created_at: {:?}", K::created_at(&rec)).unwrap();
                writeln!(out, "requires: {:?}", K::requires(&rec)).unwrap();
                writeln!(out, "links: {:?}", K::links(&rec)).unwrap();
                writeln!(out, "scopes: {:?}", K::scopes(&rec, &[])).unwrap();
                writeln!(out, "index_entries: {:?}", K::index_entries(&rec, &[])).unwrap();
                writeln!(out, "record: {rec:#?}").unwrap();
            }
        }
    }
    out
}

struct Check(Vec<&'static str>);

impl KindVisitor for Check {
    fn visit<K: Kind>(&mut self) {
        let text = render::<K>();
        assert!(text.contains("record: "), "the world has no {} translated", K::ID.name());
        expect_test::expect_file![format!("../../tests/translations/{}.txt", K::ID.module())].assert_eq(&text);
        self.0.push(K::ID.name());
    }
}

#[test]
fn every_kind_translates_the_world_as_its_fixture_says() {
    let mut check = Check(Vec::new());
    registry::visit(&mut check);
    assert_eq!(check.0.len(), registry::registered().len(), "every registered kind has a fixture");
}
