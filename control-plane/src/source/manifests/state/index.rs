//! The declaration index: for every object identity (a hash of kind, namespace and name), the
//! files declaring it; and a file's documents indexed by that hash for one diff.

use super::*;

/// A hasher for keys that are hashes already (the claims index): passes a `u64` through.
#[derive(Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; a plain fold keeps any other key correct.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(super) type IdMap<V> = std::collections::HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// The claims index: identity hash → the files declaring an object with that hash (each file
/// once, however often it declares it). About 17 bytes per object.
#[derive(Default)]
pub(super) struct DeclarationIndex {
    pub(super) first: IdMap<u32>,
    /// Further files, for the few objects declared in more than one file (or hashes shared by
    /// different objects).
    pub(super) more: IdMap<Vec<u32>>,
}

impl DeclarationIndex {
    pub(super) fn add(&mut self, h: u64, file: u32) {
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(file);
            }
            std::collections::hash_map::Entry::Occupied(o) if *o.get() == file => {}
            std::collections::hash_map::Entry::Occupied(_) => {
                let more = self.more.entry(h).or_default();
                if !more.contains(&file) {
                    more.push(file);
                }
            }
        }
    }

    pub(super) fn remove(&mut self, h: u64, file: u32) {
        let Some(first) = self.first.get_mut(&h) else { return };
        if *first == file {
            match self.more.get_mut(&h) {
                Some(more) => {
                    *first = more.swap_remove(0);
                    if more.is_empty() {
                        self.more.remove(&h);
                    }
                }
                None => {
                    self.first.remove(&h);
                }
            }
        } else if let Some(more) = self.more.get_mut(&h) {
            more.retain(|f| *f != file);
            if more.is_empty() {
                self.more.remove(&h);
            }
        }
    }

    pub(super) fn reserve(&mut self, objects: usize) {
        self.first.reserve(objects);
    }

    pub(super) fn files(&self, h: u64) -> impl Iterator<Item = u32> + '_ {
        self.first.get(&h).copied().into_iter().chain(self.more.get(&h).into_iter().flatten().copied())
    }
}

/// A file's documents as one diff sees them, with their positions by identity hash.
pub(super) struct Indexed {
    pub(super) docs: Vec<Document>,
    /// (identity hash, position in `docs`), sorted.
    pub(super) by_id: Vec<(u64, u32)>,
}

impl Indexed {
    pub(super) fn new(docs: Vec<Document>, ids: &IdHashes) -> Indexed {
        let mut by_id: Vec<(u64, u32)> = docs.iter().enumerate().map(|(i, d)| (ids.of(&d.src), i as u32)).collect();
        by_id.sort_unstable();
        Indexed { docs, by_id }
    }

    pub(super) fn empty() -> Indexed {
        Indexed { docs: Vec::new(), by_id: Vec::new() }
    }

    /// The documents of `src` (identity hash `h`), in file order.
    pub(super) fn all<'a>(&'a self, h: u64, src: &'a SourceRef) -> impl Iterator<Item = &'a Document> + 'a {
        self.all_hash(h).filter(move |d| *d.src == *src)
    }

    /// The documents whose identity hash is `h`, in file order.
    pub(super) fn all_hash(&self, h: u64) -> impl Iterator<Item = &Document> + '_ {
        let from = self.by_id.partition_point(|(x, _)| *x < h);
        self.by_id[from..].iter().take_while(move |(x, _)| *x == h).map(|(_, i)| &self.docs[*i as usize])
    }

    /// The winning (last) document of `src` in the file.
    pub(super) fn last<'a>(&'a self, h: u64, src: &'a SourceRef) -> Option<&'a Document> {
        self.all(h, src).last()
    }

    /// The distinct identity hashes of the file.
    pub(super) fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        let mut prev = None;
        self.by_id.iter().filter_map(move |(h, _)| (prev.replace(*h) != Some(*h)).then_some(*h))
    }
}

/// The identity hash of source objects ([`DeclarationIndex`]), seeded per store: the seed is
/// kept with the checkpoints, where the hashes of every file's documents are kept too.
pub(super) struct IdHashes {
    seed: u64,
    state: foldhash::fast::FixedState,
}

impl Default for IdHashes {
    /// A random seed.
    fn default() -> IdHashes {
        IdHashes::with_seed(rand::random())
    }
}

impl IdHashes {
    pub(super) fn with_seed(seed: u64) -> IdHashes {
        IdHashes { seed, state: foldhash::fast::FixedState::with_seed(seed) }
    }

    pub(super) fn seed(&self) -> u64 {
        self.seed
    }

    /// The hash of one fixed identity: another one under the same seed means another hash
    /// function (a later hasher's), so kept hashes are not valid any more.
    pub(super) fn probe(&self) -> u64 {
        self.parts(KindId::Zone, b"probe", b"probe")
    }

    pub(super) fn of(&self, src: &SourceRef) -> u64 {
        self.parts(src.kind, src.namespace.as_bytes(), src.name.as_bytes())
    }

    /// The identity hash of (kind, namespace, name) given as bytes (as the store holds them).
    pub(super) fn parts(&self, kind: KindId, namespace: &[u8], name: &[u8]) -> u64 {
        self.state.hash_one((kind.code(), namespace, name))
    }
}
