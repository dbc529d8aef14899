//! Document splitting, versions and per-file scanning (only the Group kind, which is always
//! registered).

use super::state::hex_decode;
use super::*;
use schema::kind::Features;
use sha2::Digest;

fn ctx() -> Context {
    Context { now: schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap(), features: Features::default() }
}

fn group(name: &str, display: &str) -> String {
    format!(
        "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: {name}\n  namespace: poc\n  labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  displayName: {display}\n"
    )
}

/// Scans `text` as `f.yaml` and returns (documents as `name:ok|skip`, skip reasons, ignored).
fn check(text: &str) -> (Vec<String>, Vec<String>, usize, bool) {
    let handlers = Handlers::new(&Features::default());
    let scan = scan_text("f.yaml", text, false, &handlers, &ctx());
    let docs = scan
        .docs
        .iter()
        .map(|d| format!("{}#{}:{}", d.src.name, d.origin.document, if d.record.is_some() { "ok" } else { "skip" }))
        .collect();
    let skips = scan.skips.iter().map(|s| s.to_string()).collect();
    (docs, skips, scan.ignored.len(), scan.partial)
}

#[test]
fn split_multi_document_streams() {
    let text = "# header comment\n---\na: 1\n---\n\n# only a comment\n---\nb: 2\n...\n--- c: 3\n---\r\nd: 4\r\n";
    let chunks = split_documents(text);
    let got: Vec<(usize, usize, &str)> = chunks.iter().map(|c| (c.document, c.line, c.text.trim())).collect();
    assert_eq!(got, vec![(1, 3, "a: 1"), (2, 8, "b: 2"), (3, 10, "c: 3"), (4, 12, "d: 4")]);
}

#[test]
fn split_keeps_block_scalars_and_indented_dashes() {
    let text = "a: |\n  ---\n  text\nb: ---x\n";
    let chunks = split_documents(text);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].text, text);
    assert!(split_documents("").is_empty());
    assert!(split_documents("---\n---\n# c\n").is_empty());
}

/// A document of one line without line end at the end of the file, and lines ending in
/// `\r\n`, are not copied: a file of one long line (a hostile one of a gigabyte) is held once,
/// not twice. Documents are measured as with `\n` line ends.
#[test]
fn a_last_line_without_its_line_end_is_borrowed_not_copied() {
    let text = "a: 1\n---\nb: 2\n---\nc: 3";
    let parts = split_parts(text);
    let got: Vec<(&str, bool)> = parts.iter().map(|p| (p.text.as_ref(), matches!(p.text, Cow::Borrowed(_)))).collect();
    assert_eq!(got, [("a: 1\n", true), ("b: 2\n", true), ("c: 3", true)]);
    // After other lines, such a last line is copied with its `\n`: a kept block scalar reads
    // its trailing line breaks from it.
    let parts = split_parts("a: |+\n  x\n  ");
    assert_eq!(parts[0].text, "a: |+\n  x\n  \n");
    assert_eq!(serde_saphyr::from_str::<Value>(&parts[0].text).unwrap()["a"], "x\n\n");
    // Lines ending in `\r\n` are not copied either; a stray `\r` before one is (as before).
    let parts = split_parts("a: 1\r\n---\r\nb: 2\r\nc: 3\r\r\nd: 4\r\n");
    let got: Vec<(&str, bool)> = parts.iter().map(|p| (p.text.as_ref(), matches!(p.text, Cow::Borrowed(_)))).collect();
    assert_eq!(got, [("a: 1\r\n", true), ("b: 2\r\nc: 3\nd: 4\n", false)]);
    let long = "x".repeat(3 << 20);
    let parts = split_parts(&long);
    assert!(matches!(&parts[0].text, Cow::Borrowed(t) if t.len() == long.len()));
    let (docs, skips, _, partial) = check(&long);
    assert!(docs.is_empty() && partial);
    assert!(skips[0].contains(&format!("the document is {} bytes", long.len() + 1)), "measured with its `\\n`: {skips:?}");
    // A document is measured as with `\n` line ends: within the limit or not with either.
    let handlers = Handlers::new(&Features::default()).with_max_document_bytes(4096);
    let base = group("g", "G");
    let lf = format!("{base}  description: {}\n", "y".repeat(4096 - base.len() - 16));
    assert_eq!(measured_len(&lf), 4096);
    let over = lf.replacen("yy", "yyy", 1);
    for (text, skipped) in
        [(lf.clone(), false), (lf.replace('\n', "\r\n"), false), (over.clone(), true), (over.replace('\n', "\r\n"), true)]
    {
        assert!(matches!(&split_parts(&text)[0].text, Cow::Borrowed(_)));
        let scan = scan_text("f.yaml", &text, false, &handlers, &ctx());
        let skips: Vec<String> = scan.skips.iter().map(ToString::to_string).collect();
        assert_eq!(
            (scan.docs.iter().filter(|d| d.record.is_some()).count(), skips.len()),
            (usize::from(!skipped), usize::from(skipped)),
            "{skips:?}"
        );
        if skipped {
            assert!(skips[0].contains("the document is 4097 bytes"), "{skips:?}");
        }
    }
}

/// A file of many foreign and broken documents holds a report of the first [`KEPT_PER_FILE`]
/// of each sort and counts the others; its objects are all read.
#[test]
fn a_file_keeps_a_bounded_number_of_reports_and_counts_the_rest() {
    let foreign = "a: b\n---\n".repeat(KEPT_PER_FILE + 500);
    let broken = "kind: [\n---\n".repeat(KEPT_PER_FILE + 700);
    let text = format!("{foreign}{broken}{}", group("last", "L"));
    let scan = scan_text("f.yaml", &text, false, &Handlers::new(&Features::default()), &ctx());
    assert_eq!((scan.ignored.len(), scan.skips.len()), (KEPT_PER_FILE, KEPT_PER_FILE));
    assert_eq!(scan.left_out, LeftOut { skips: 700, failures: 700, ignored: 500 });
    assert_eq!(scan.skips[0].origin.document, KEPT_PER_FILE + 501, "the first ones are kept");
    assert_eq!(
        scan.docs.iter().map(|d| (d.src.name.as_str(), d.origin.document)).collect::<Vec<_>>(),
        [("last", 2 * KEPT_PER_FILE + 1201)]
    );
    assert!(scan.partial);
}

/// A file with Windows line ends (read without copying its lines) or classic Mac OS ones (a
/// lone CR) holds the same objects at the same versions as with Unix ones: block, folded and
/// multi-line scalars included.
#[test]
fn windows_and_classic_mac_line_ends_read_as_unix_ones() {
    let lf = format!(
        "{}---\n{}",
        group("a", "A"),
        "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: b # c\n  namespace: poc\nspec:\n  displayName: |\n    one\n    two\n  description: >\n    folded\n    text\n"
    );
    let crlf = lf.replace('\n', "\r\n");
    let scan = |text: &str| -> Vec<(String, String)> {
        let handlers = Handlers::new(&Features::default());
        let s = scan_text("f.yaml", text, false, &handlers, &ctx());
        assert!(s.skips.is_empty(), "{:?}", s.skips.iter().map(ToString::to_string).collect::<Vec<_>>());
        s.docs.iter().map(|d| (d.src.name.clone(), d.version.hex())).collect()
    };
    let (unix, windows) = (scan(&lf), scan(&crlf));
    assert_eq!(unix.len(), 2);
    assert_eq!(unix, windows);
    // Classic Mac OS line ends (a lone CR) too, even after a first comment line.
    assert_eq!(scan(&format!("# teams\r---\r{}", lf.replace('\n', "\r"))), unix);
    // Every scalar style the YAML parser reads, and flow collections over several lines.
    let lf = "a: |+\n  one\n  two\n\nb: \"multi\n  line\n\n  quoted\"\nc: 'single\n  quoted'\nd: >-\n  x\n\n  y\ne: |-\n  z\n   w\nf: [1,\n  2]\ng: {x: 1,\n  y: 2}\nh: plain\n\n  more\n";
    let unix: Value = serde_saphyr::from_str(lf).unwrap();
    assert_eq!(unix["a"], "one\ntwo\n\n");
    assert_eq!(serde_saphyr::from_str::<Value>(&lf.replace('\n', "\r\n")).unwrap(), unix);
}

#[test]
fn a_broken_document_between_two_good_ones_is_skipped_alone() {
    let text = format!(
        "{}---\napiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: broken\n  labels: [\n---\n{}",
        group("a", "A"),
        group("b", "B")
    );
    let (docs, skips, _, partial) = check(&text);
    assert_eq!(docs, vec!["a#1:ok", "b#3:ok"]);
    assert_eq!(skips.len(), 1);
    assert_eq!(skips[0], "f.yaml#2 (line 11): Group broken: not valid YAML: line 15 column 11: unclosed bracket '['");
    assert!(partial, "an unreadable identity keeps the file's previous objects");
}

#[test]
fn empty_documents_and_other_kinds_are_ignored() {
    let text = format!(
        "---\n# nothing\n---\n~\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: poc\n---\napiVersion: admin.cp.ei.telekom.de/v1\nkind: Environment\nmetadata:\n  name: poc\n---\napiVersion: organization.cp.ei.telekom.de/v2\nkind: Group\nmetadata:\n  name: future\n---\n{}",
        group("a", "A")
    );
    let (docs, skips, ignored, partial) = check(&text);
    assert_eq!(docs, vec!["a#5:ok"]);
    assert!(skips.is_empty(), "{skips:?}");
    assert_eq!(ignored, 4);
    assert!(!partial);
}

#[test]
fn decode_and_translate_failures_name_the_field() {
    let no_spec = "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: nospec\n  namespace: poc\n";
    let empty_display = group("empty", "\"\"");
    let no_ns = "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: nons\nspec:\n  displayName: X\n";
    let no_name = "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  namespace: poc\nspec:\n  displayName: X\n";
    let bad_type = "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: badtype\n  namespace: poc\nspec:\n  displayName: [1]\n";
    let text = [no_spec, &empty_display, no_ns, no_name, bad_type].join("---\n");
    let (docs, skips, _, partial) = check(&text);
    assert_eq!(docs, vec!["nospec#1:skip", "empty#2:skip", "nons#3:skip", "badtype#5:skip"]);
    assert!(skips[0].contains("Group poc/nospec: invalid document:") && skips[0].contains("spec"), "{}", skips[0]);
    assert!(skips[1].contains("required field `spec.displayName`"), "{}", skips[1]);
    assert!(skips[2].contains("Group nons: not projected: required field `metadata.namespace`"), "{}", skips[2]);
    assert!(skips[3].contains("metadata.name"), "{}", skips[3]);
    assert!(skips[4].contains("spec.displayName"), "{}", skips[4]);
    assert!(partial);
}

#[test]
fn json_files_are_one_document_and_lists_expand() {
    let handlers = Handlers::new(&Features::default());
    let json = r#"{"apiVersion":"organization.cp.ei.telekom.de/v1","kind":"Group","metadata":{"name":"j","namespace":"poc"},"spec":{"displayName":"J"}}"#;
    let scan = scan_text("g.json", json, true, &handlers, &ctx());
    assert_eq!(scan.docs.len(), 1);
    assert!(scan.docs[0].record.is_some());
    let list = format!("apiVersion: v1\nkind: List\nitems:\n- {}\n- {}\n", json, json.replace("\"j\"", "\"k\""));
    let scan = scan_text("l.yaml", &list, false, &handlers, &ctx());
    let names: Vec<String> = scan.docs.iter().map(|d| format!("{}@{}", d.src.name, d.origin)).collect();
    assert_eq!(names, vec!["j@l.yaml#1.items[0] (line 1)", "k@l.yaml#1.items[1] (line 1)"]);
    let scan = scan_text("bad.json", "{\"apiVersion\": ", true, &handlers, &ctx());
    assert_eq!(scan.skips.len(), 1);
    assert!(matches!(scan.skips[0].reason, SkipReason::Parse(_)));
}

#[test]
fn yaml_documents_that_are_json_lines_parse_as_their_yaml() {
    // The JSON fast path of YAML files (generated worlds) gives the same document and version
    // as the YAML parser; a flow mapping that is not valid JSON still parses as YAML.
    let handlers = Handlers::new(&Features::default());
    let json = r#"{"apiVersion":"organization.cp.ei.telekom.de/v1","kind":"Group","metadata":{"name":"j","namespace":"poc"},"spec":{"displayName":"J \u00e9 \/"}}"#;
    let fast = scan_text("a.yaml", &format!("---\n{json}\n"), false, &handlers, &ctx());
    let value: Value = serde_saphyr::from_str(json).unwrap();
    assert_eq!(fast.docs.len(), 1);
    assert!(fast.docs[0].record.is_some());
    assert_eq!(fast.docs[0].version, version_of(&value));
    let flow =
        "{apiVersion: organization.cp.ei.telekom.de/v1, kind: Group, metadata: {name: k, namespace: poc}, spec: {displayName: K}} # c\n";
    let slow = scan_text("b.yaml", flow, false, &handlers, &ctx());
    assert_eq!(slow.docs.len(), 1, "{:?}", slow.skips.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(slow.docs[0].record.is_some());
}

#[test]
fn versions_ignore_key_order_and_formatting() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#).unwrap();
    let b: Value = serde_saphyr::from_str("a:\n  x: s\n  y: [1, 2]\nb: 1\n").unwrap();
    assert_eq!(version_of(&a), version_of(&b));
    let mut s = String::new();
    canonical_json(&a, &mut s);
    assert_eq!(s, r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
    let hex = version_of(&a).hex();
    let expected: String = sha2::Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, expected, "the version is the SHA-256 of the canonical JSON, in lowercase hex");
    let mut bytes = [0u8; 32];
    assert!(hex_decode(&hex, &mut bytes) && bytes == version_of(&a).0);
    assert!(!hex_decode(hex.to_uppercase(), &mut bytes), "only lowercase, as stored");
    assert!(!hex_decode(&hex[..63], &mut bytes));
    let mut prefix = [0u8; 16];
    assert!(hex_decode(&hex[..32], &mut prefix) && prefix[..] == version_of(&a).0[..16]);
    let c: Value = serde_json::from_str(r#"{"b":2,"a":{"y":[1,2],"x":"s"}}"#).unwrap();
    assert_ne!(version_of(&a), version_of(&c));
    // Escapes, non-ASCII keys, numbers of every kind, nesting: the hash is still that of the
    // canonical text.
    let d: Value =
        serde_json::from_str(r#"{"z":[{"q":null,"é":1.5e3},-7,18446744073709551615,0.1],"A":"x\"y\n\u0001","":{"b":true,"a":[]}}"#)
            .unwrap();
    let mut s = String::new();
    canonical_json(&d, &mut s);
    assert!(s.starts_with(r#"{"":{"a":[],"b":true},"A":"#), "{s}");
    let expected: [u8; 32] = sha2::Sha256::digest(s.as_bytes()).into();
    assert_eq!(version_of(&d).0, expected);
}

/// The scan writes a document's JSON once, for its version and for the document kept: the
/// same version as [`version_of`], and the same document as the one serialized for it alone,
/// with or without what is not kept.
#[test]
fn a_scanned_document_keeps_the_json_it_was_hashed_from() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = storage::Store::open(store_dir.path()).unwrap();
    let handlers = Handlers::new(&Features::default()).with_dictionaries(store.dictionaries());
    let plain = r#"{"apiVersion":"organization.cp.ei.telekom.de/v1","kind":"Group","metadata":{"name":"p","namespace":"poc"},"spec":{"displayName":"P"}}"#;
    let managed = r#"{"apiVersion":"organization.cp.ei.telekom.de/v1","kind":"Group","metadata":{"name":"m","namespace":"poc","managedFields":[{"manager":"kubectl"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"me"}},"spec":{"displayName":"M"}}"#;
    let scan = scan_text("a.yaml", &format!("---\n{plain}\n---\n{managed}\n"), false, &handlers, &ctx());
    assert_eq!(scan.docs.len(), 2);
    for (doc, text) in scan.docs.iter().zip([plain, managed]) {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(doc.version, version_of(&value));
        let kept = store.dictionaries().decode(KindId::Group, doc.record.as_ref().unwrap().document().unwrap()).unwrap();
        assert_eq!(kept, storage::documents::document_json(&value));
    }
    assert!(storage::documents::keeps_whole(&serde_json::from_str(plain).unwrap()));
    assert!(!storage::documents::keeps_whole(&serde_json::from_str(managed).unwrap()));
}

#[test]
fn identity_is_guessed_from_unparsable_text() {
    let (k, ns, n) = guess_identity("apiVersion: x\nkind: Team\nmetadata:\n  name: \"t1\" # c\n  namespace: poc\n  labels: {\nspec: [\n");
    assert_eq!((k.as_deref(), ns.as_deref(), n.as_deref()), (Some("Team"), Some("poc"), Some("t1")));
}

#[test]
fn fragments_of_broken_text_are_not_guessed_as_an_identity() {
    let (k, ns, n) = guess_identity("kind: [unclosed\nmetadata:\n  name: {a: b\n  namespace: poc--team\n");
    assert_eq!((k.as_deref(), ns.as_deref(), n.as_deref()), (None, Some("poc--team"), None));
}

/// A file of many documents of no kind logs `LOGGED_PER_FILE` of them and one count; other
/// files keep their own lines.
#[test]
fn findings_are_logged_up_to_a_bound_per_file() {
    let ignored = |file: &str, document: usize| Ignored {
        origin: DocumentPosition { file: Arc::from(file), document, item: None, line: document },
        reason: "no kind".into(),
        disabled: false,
    };
    let mut items: Vec<Ignored> = (1..=200_000).map(|d| ignored("huge.yaml", d)).collect();
    items.insert(5, ignored("small.yaml", 1));
    items.push(ignored("small.yaml", 2));
    let (kept, left) = per_file(&items, |i| &i.origin.file);
    assert_eq!(kept.len(), LOGGED_PER_FILE + 2);
    assert_eq!(kept.iter().filter(|i| &*i.origin.file == "small.yaml").count(), 2);
    assert_eq!(kept.iter().filter(|i| &*i.origin.file == "huge.yaml").map(|i| i.origin.document).max(), Some(LOGGED_PER_FILE));
    assert_eq!(left, vec![(Arc::from("huge.yaml"), 200_000 - LOGGED_PER_FILE)]);
}

/// A source thread that panics leaves the server not ready, naming the source and the panic;
/// one that ends normally changes nothing.
#[test]
fn a_source_that_panics_makes_the_server_unready_and_says_why() {
    let readiness = Readiness::new(Vec::<String>::new());
    readiness.serve_warm();
    crate::source::report_failure(&readiness, "manifests", || {});
    assert!(readiness.is_ready());
    assert_eq!(readiness.status().source_fault, None);
    crate::source::report_failure(&readiness, "manifests", || panic!("entered unreachable code"));
    assert!(!readiness.is_ready(), "a source that stopped is not followed: not ready");
    let status = readiness.status();
    assert!(!status.ready);
    let fault = status.source_fault.unwrap();
    assert!(fault.starts_with("the manifests source stopped: entered unreachable code;"), "{fault}");
    assert!(fault.contains("restart the server"), "{fault}");
}

/// A streamed file is scanned in blocks of at most the block's documents and, from the second
/// document of a block on, its bytes: a document larger than the bytes is a block of its own,
/// and every document is in exactly one block, in file order.
#[test]
fn blocks_are_cut_by_documents_and_by_bytes() {
    let text: String = [("a", 10), ("b", 10), ("c", 50), ("d", 10), ("e", 10), ("f", 10), ("g", 10)]
        .iter()
        .map(|(name, width)| group(name, &"x".repeat(*width)))
        .collect::<Vec<_>>()
        .join("---\n");
    let parts = split_parts(&text);
    let sizes: Vec<usize> = parts.iter().map(|p| p.text.len()).collect();
    let (small, large) = (sizes[0], sizes[2]);
    assert!(large > small + 30, "{sizes:?}");
    let blocks = |block: Block| -> Vec<Vec<usize>> {
        let mut parts = split_parts(&text).into_iter().peekable();
        std::iter::from_fn(|| Some(block.take(&mut parts)).filter(|b| !b.is_empty()))
            .map(|b| b.iter().map(|p| p.document).collect())
            .collect()
    };
    assert_eq!(blocks(Block { documents: 3, bytes: 2 * small }), [vec![1, 2], vec![3], vec![4, 5], vec![6, 7]]);
    let by_count: Vec<usize> = blocks(Block { documents: 3, bytes: usize::MAX }).iter().map(Vec::len).collect();
    assert_eq!(by_count, [3, 3, 1]);
    assert_eq!(blocks(Block { documents: usize::MAX, bytes: usize::MAX }).iter().map(Vec::len).collect::<Vec<_>>(), [7]);
    assert_eq!(blocks(Block { documents: 0, bytes: 0 }).len(), 7, "at least one document per block");
    assert!(Block { documents: 3, bytes: 10 }.take(&mut std::iter::empty::<Part<'_>>().peekable()).is_empty());
}

/// A streamed file of large documents hands its records on in blocks of at most 16 MiB of
/// text (and 8,192 documents), not all at once.
#[test]
fn a_streamed_file_of_large_documents_is_handed_on_in_blocks_of_bounded_bytes() {
    let doc = group("g", &"y".repeat(1 << 20));
    let text: String = (0..40).map(|i| doc.replacen("name: g", &format!("name: g{i}"), 1)).collect::<Vec<_>>().join("---\n");
    let handlers = Handlers::new(&Features::default()).with_max_document_bytes(2 << 20);
    let mut blocks = Vec::new();
    let scan = scan_text_blocks("f.yaml", &text, false, &handlers, &ctx(), STREAM_BLOCK, &mut |b| {
        blocks.push(b.docs.len());
    });
    assert_eq!(scan.docs.len(), 40, "{:?}", scan.skips);
    assert_eq!(blocks.iter().sum::<usize>(), 40);
    assert!(blocks.len() >= 3 && blocks.iter().all(|n| *n <= 16), "{blocks:?}");
}

/// A source's task on an async runtime (the kube source's watch of one kind) that panics leaves
/// the server not ready, naming the source and the panic; one that ends normally changes
/// nothing.
#[tokio::test]
async fn a_source_task_that_panics_makes_the_server_unready_and_says_why() {
    let readiness = Readiness::new(Vec::<String>::new());
    readiness.serve_warm();
    crate::source::report_task_failure(&readiness, "kube (Zone)", async {}).await;
    assert!(readiness.is_ready());
    let task = tokio::spawn({
        let readiness = readiness.clone();
        async move { crate::source::report_task_failure(&readiness, "kube (Zone)", async { panic!("a watch failed") }).await }
    });
    task.await.expect("the panic is caught in the task");
    assert!(!readiness.is_ready(), "a source that stopped is not followed: not ready");
    let fault = readiness.status().source_fault.unwrap();
    assert!(fault.starts_with("the kube (Zone) source stopped: a watch failed;"), "{fault}");
}
