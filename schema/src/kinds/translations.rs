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

/// Per kind: the kinds its world translations require or link to, and the indexes it writes.
#[derive(Default)]
struct References {
    named: std::collections::BTreeMap<crate::KindId, std::collections::BTreeSet<crate::KindId>>,
    linked_indexes: Vec<(crate::KindId, crate::kind::IndexName)>,
    index_owners: std::collections::BTreeMap<crate::kind::IndexName, crate::KindId>,
}

impl KindVisitor for References {
    fn visit<K: Kind>(&mut self) {
        let named = self.named.entry(K::ID).or_default();
        let docs = world_objects(K::ID.name());
        assert!(!docs.is_empty(), "the world has no {}: add a document of it to examples/world/", K::ID.name());
        for doc in docs {
            let cr: K::Cr = serde_json::from_value(doc.clone()).unwrap();
            let Ok(rec) = K::translate(&cr, &ctx()) else { continue };
            named.extend(K::requires(&rec).into_iter().map(|parent| parent.kind));
            for link in K::links(&rec) {
                match link {
                    crate::kind::Link::Via { kind, .. } => _ = named.insert(kind),
                    crate::kind::Link::First { index, .. } => self.linked_indexes.push((K::ID, index)),
                }
            }
            for (index, _) in K::index_entries(&rec, &[]) {
                self.index_owners.insert(index, K::ID);
            }
        }
    }
}

/// The table's `parents` column is what the translations say: for every kind, the kinds its
/// world objects require, link to through another record, or find through another kind's index.
#[test]
fn the_parents_column_is_what_the_translations_reference() {
    let mut references = References::default();
    registry::visit(&mut references);
    let References { mut named, linked_indexes, index_owners } = references;
    for (kind, index) in linked_indexes {
        let owner = index_owners.get(&index).unwrap_or_else(|| panic!("{kind:?} links through {index:?}, which no kind writes"));
        named.get_mut(&kind).unwrap().insert(*owner);
    }
    for (kind, referenced) in named {
        let declared: std::collections::BTreeSet<crate::KindId> = kind.parents().iter().copied().collect();
        assert_eq!(declared, referenced, "{kind:?}: the parents column of crds::kind_table! against its translations");
    }
}
