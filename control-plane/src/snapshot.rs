//! The offline snapshot commands: `snapshot export --data-dir`, `snapshot restore`, `snapshot
//! verify` (the file format is [`storage::snapshot`]).
//!
//! Restore never touches the target's store until the new one is complete: the snapshot is
//! verified, restored into a staging directory inside the target (`DIR/.restore-<pid>`: every
//! record decoded, its index entries and counters derived from it), its search index
//! (`search/`, derived data, not part of the snapshot) built from the restored records, and only
//! then moved into place by renames, so the target may be a volume's mount point. A restore
//! holds the data directory's lock ([`lock_data_dir`]: `serve` holds it too, so neither starts
//! while the other runs); SIGTERM and SIGINT remove what a restore or an export had not
//! finished ([`remove_unfinished_on_termination`]).

use anyhow::{bail, Context, Result};
use schema::Timestamp;
use std::io::Write;
use std::path::{Path, PathBuf};
use storage::snapshot::{self, Summary};
use storage::{StorageError, Store, DB_FILE};

/// Exports the read model of `data_dir` (no server may hold it) into `out`.
///
/// # Errors
/// A missing read model, a database held by a running server (pointing to the online export),
/// read or write failures.
pub fn export_offline(data_dir: &Path, out: &Path) -> Result<Summary> {
    if !data_dir.join(DB_FILE).is_file() {
        bail!("{} holds no read model ({DB_FILE} is missing)", data_dir.display());
    }
    let store = match Store::open(data_dir) {
        Ok(s) => s,
        Err(StorageError::Locked(path)) => bail!(
            "the database {path} is held by a running server; stop it, or take an online snapshot from it: \
             control-plane snapshot export --server URL --token T --out FILE (GET /admin/v1/snapshot)"
        ),
        Err(e) => return Err(e).with_context(|| format!("opening the read model in {}", data_dir.display())),
    };
    let view = store.read().context("starting a read transaction")?;
    let partial = sibling(out, "partial");
    let writing = Writing::begin(partial.clone(), None);
    tracing::info!(partial = %partial.display(), "writing the snapshot");
    let result = (|| -> Result<Summary> {
        let file =
            writing.while_unfinished(|| std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display())))?;
        let mut w = std::io::BufWriter::new(file);
        let summary = snapshot::export(&view, now(), &mut w).with_context(|| format!("writing the snapshot to {}", partial.display()))?;
        let file = w.into_inner().map_err(|e| e.into_error()).context("writing the snapshot")?;
        file.sync_all().context("syncing the snapshot")?;
        writing.moving();
        std::fs::rename(&partial, out).with_context(|| format!("renaming to {}", out.display()))?;
        Ok(summary)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    drop(writing);
    result
}

/// Downloads a snapshot from a running server (`GET {server}/admin/v1/snapshot` with the admin
/// `token`), verifies it and writes it to `out`.
///
/// # Errors
/// The server cannot be reached or refuses, the download is not a valid snapshot, writing fails.
pub async fn export_online(server: &str, token: Option<&str>, out: &Path) -> Result<Summary> {
    if !(server.starts_with("http://") || server.starts_with("https://")) {
        bail!("--server must be a base URL with a scheme, e.g. http://{server}");
    }
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        bail!("no admin token: pass --token or set CP_ADMIN_TOKEN");
    };
    let url = format!("{}/admin/v1/snapshot", server.trim_end_matches('/'));
    let req = reqwest::Client::new().get(&url).bearer_auth(token);
    let resp = req.send().await.with_context(|| format!("requesting {url}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        bail!("{url} answered {status}: {body}");
    }
    let bytes = resp.bytes().await.with_context(|| format!("downloading {url}"))?;
    let summary = snapshot::verify(&bytes).context("the downloaded snapshot is not valid")?;
    let partial = sibling(out, "partial");
    let result = std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::File::open(&partial)?.sync_all())
        .and_then(|()| std::fs::rename(&partial, out))
        .with_context(|| format!("writing {}", out.display()));
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result?;
    Ok(summary)
}

/// Reads a snapshot file whole. Only a regular file is read: its size bounds what is read (a
/// device such as `/dev/zero`, a FIFO or a directory is refused before reading), and a file that
/// does not start with the snapshot magic is refused after its first 8 bytes (a large or sparse
/// file of something else is not read into memory).
///
/// # Errors
/// `file` is not a regular file, cannot be read, or is not a snapshot
/// ([`storage::snapshot::SnapshotError::NotASnapshot`]).
fn read_snapshot_file(file: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let meta = std::fs::metadata(file).with_context(|| format!("reading {}", file.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file: a snapshot is a file written by `snapshot export`", file.display());
    }
    let mut f = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let mut magic = Vec::with_capacity(storage::snapshot::MAGIC.len());
    (&mut f).take(storage::snapshot::MAGIC.len() as u64).read_to_end(&mut magic).with_context(|| format!("reading {}", file.display()))?;
    if magic.len() == storage::snapshot::MAGIC.len() && magic != storage::snapshot::MAGIC {
        return Err(anyhow::Error::from(storage::snapshot::SnapshotError::NotASnapshot))
            .with_context(|| format!("reading {}", file.display()));
    }
    let mut bytes = magic;
    bytes.reserve(meta.len().saturating_sub(bytes.len() as u64) as usize);
    f.read_to_end(&mut bytes).with_context(|| format!("reading {}", file.display()))?;
    Ok(bytes)
}

/// Verifies the snapshot file `file`.
///
/// # Errors
/// The file cannot be read, or the first failed check ([`snapshot::SnapshotError`]).
pub fn verify(file: &Path) -> Result<Summary> {
    let bytes = read_snapshot_file(file)?;
    snapshot::verify(&bytes).with_context(|| format!("verifying {}", file.display()))
}

/// Restores `file` into `data_dir`. A non-empty `data_dir` is refused unless `force`, and even
/// with `force` unless it holds only what a data directory holds (`readmodel.redb`, `search/`,
/// leftovers of an interrupted creation or restore, a volume's `lost+found`, which is left
/// alone): `--force` never deletes unrelated files.
///
/// The new store is built in a staging directory inside `data_dir` (so `data_dir` may be a
/// volume's mount point, as in the Helm chart), verified, given its search index, and only then
/// moved into place: `search/` first, then `readmodel.redb` by one atomic rename. On any error
/// before that, `data_dir` is left as it was. A crash during the moves leaves either the old or
/// the new database; a search index that does not match it is rebuilt on the next start.
///
/// # Errors
/// A damaged or incompatible snapshot, a non-empty target without `force`, a target with
/// foreign files, a target held by a running server, I/O failures.
pub fn restore(file: &Path, data_dir: &Path, force: bool) -> Result<Summary> {
    let started = std::time::Instant::now();
    let search = storage::search::SEARCH_DIR;
    let staging = data_dir.join(format!("{STAGING_PREFIX}{}", std::process::id()));
    let writing = Writing::begin(staging.clone(), None);
    let created = writing.creating(|| create_target(data_dir))?;
    // Held until the store is in place, taken before the file is read (a directory in use is
    // refused at once, not after seconds of reading): checked and built by one process at a time.
    let target_lock = match lock_data_dir(data_dir) {
        Ok(lock) => lock,
        Err(e) => {
            // Never removed here: the process holding the lock may be using it.
            writing.keep_created();
            return Err(e);
        }
    };
    let restored = (|| {
        let bytes = read_snapshot_file(file)?;
        let snap = snapshot::decode_for_restore(&bytes).with_context(|| format!("refusing to restore {}", file.display()))?;
        tracing::info!(seconds = started.elapsed().as_secs_f64(), bytes = bytes.len(), "snapshot read, checked and decompressed");
        check_restore_target(data_dir, force)?;
        build_staged(&staging, &snap, &writing)?;
        Ok((bytes.len(), snap))
    })();
    let (bytes, snap) = match restored {
        Ok(restored) => restored,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            if let Some(created) = &created {
                let _ = std::fs::remove_dir(created);
            }
            return Err(e);
        }
    };
    let swap = || -> std::io::Result<()> {
        let target_search = data_dir.join(search);
        if target_search.exists() {
            std::fs::remove_dir_all(&target_search)?;
        }
        std::fs::rename(staging.join(search), &target_search)?;
        std::fs::rename(staging.join(DB_FILE), data_dir.join(DB_FILE))?;
        std::fs::remove_dir_all(&staging)?;
        std::fs::File::open(data_dir)?.sync_all()
    };
    writing.moving();
    swap().with_context(|| format!("moving the restored store into {}", data_dir.display()))?;
    drop((writing, target_lock));
    tracing::info!(seconds = started.elapsed().as_secs_f64(), data_dir = %data_dir.display(), "snapshot restored");
    Ok(Summary { format: snap.format, header: snap.header, bytes: bytes as u64 })
}

/// Creates the data directory `data_dir` of a restore; returns its canonical path when this call
/// created it (a signal or an error removes it again, when empty), `None` when it existed. Judged
/// by the one `mkdir` of its last component, not by the path as typed: `new/../data` names an
/// existing `data` even when `new` did not exist, and of two restores creating it at once only
/// one created it.
///
/// # Errors
/// The directory or its parents cannot be created.
fn create_target(data_dir: &Path) -> Result<Option<PathBuf>> {
    let creating = || format!("creating {}", data_dir.display());
    if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(creating)?;
    }
    match std::fs::create_dir(data_dir) {
        Ok(()) => Ok(Some(std::fs::canonicalize(data_dir).with_context(creating)?)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && data_dir.is_dir() => Ok(None),
        Err(e) => Err(e).with_context(creating),
    }
}

/// The lock on a data directory ([`std::fs::File::try_lock`] on the directory itself, released
/// however the process ends), held by every process that writes one: `serve` while it runs, a
/// `snapshot restore` until its store is in place. While it is held, no other process serves,
/// restores into or removes anything from the directory.
pub struct DataDirLock {
    _dir: std::fs::File,
}

/// Locks the existing data directory `data_dir` ([`DataDirLock`]), then removes the staging
/// directories killed restores left in it ([`remove_restore_leftovers`]: a restore in progress
/// would hold the lock). Called by `serve` before it opens the store and by `snapshot restore`
/// before it checks the target.
///
/// # Errors
/// Another process (a running server, a restore) holds the lock; the directory cannot be opened
/// or locked; a leftover cannot be removed.
pub fn lock_data_dir(data_dir: &Path) -> Result<DataDirLock> {
    let dir = std::fs::File::open(data_dir).with_context(|| format!("opening the data directory {}", data_dir.display()))?;
    lock_opened(dir, data_dir)
}

/// [`lock_data_dir`] of `dir`, opened from the path `data_dir`: refused when the path no longer
/// names it once it is locked.
fn lock_opened(dir: std::fs::File, data_dir: &Path) -> Result<DataDirLock> {
    use std::os::unix::fs::MetadataExt;
    let identity = |m: std::fs::Metadata| (m.dev(), m.ino());
    let opening = || format!("opening the data directory {}", data_dir.display());
    match dir.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "the data directory {} is in use by another process (a running server or a restore holds its lock); \
             stop the server or wait for the restore to end",
            data_dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", data_dir.display())),
    }
    // The directory opened may have been removed (by the restore that created it, stopped)
    // before the lock was taken: a lock on it would guard nothing the path names now.
    let locked = identity(dir.metadata().with_context(opening)?);
    if std::fs::metadata(data_dir).map(identity).ok() != Some(locked) {
        bail!("the data directory {} was removed or replaced while it was locked; start again", data_dir.display());
    }
    remove_restore_leftovers(data_dir)?;
    Ok(DataDirLock { _dir: dir })
}

/// Builds the restored store of `snap` and its search index in the new staging directory
/// `staging`.
///
/// Every directory is made while `writing` is unfinished ([`Writing::while_unfinished`]): a
/// signal that removed the staging directory never sees it made again.
///
/// # Errors
/// The staging directory cannot be created, the store write or the search index fails.
fn build_staged(staging: &Path, snap: &snapshot::Snapshot, writing: &Writing) -> Result<()> {
    let search_dir = staging.join(storage::search::SEARCH_DIR);
    let store = writing.while_unfinished(|| {
        std::fs::create_dir(staging).with_context(|| format!("creating {}", staging.display()))?;
        std::fs::create_dir(&search_dir).with_context(|| format!("creating {}", search_dir.display()))?;
        Store::open(staging).with_context(|| format!("creating {}", staging.display()))
    })?;
    tracing::info!(staging = %staging.display(), "building the restored store");
    // The catalogue search index is derived data: build it now, so the first start after a
    // restore serves search at once (it would otherwise be rebuilt on that start). From the
    // snapshot's records while the store is written, when it restores every kind as it is;
    // else from the store written.
    let building = || format!("building the search index in {}", search_dir.display());
    let beside = snap.header.rederived_kinds().is_empty();
    let started = std::time::Instant::now();
    let searched = store
        .restore_beside(snap, || beside.then(|| storage::search::Catalogue::build_for_restore(&search_dir, snap)))
        .with_context(|| format!("store write failed while restoring into {}", staging.display()))?;
    tracing::info!(seconds = started.elapsed().as_secs_f64(), revision = snap.header.revision, "store written and committed");
    match searched {
        Some(searched) => searched.map(|_| ()).with_context(building)?,
        None => writing.while_unfinished(|| storage::search::Catalogue::open(&search_dir, &store).with_context(building))?.0.shutdown(),
    }
    Ok(())
}

/// Refuses to restore into `data_dir` (an existing directory) when it holds anything without
/// `force`, anything but a data directory's files even with it, or a database held by a running
/// server.
///
/// # Errors
/// The reason to refuse, or a directory that cannot be read.
fn check_restore_target(data_dir: &Path, force: bool) -> Result<()> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(data_dir).with_context(|| format!("reading {}", data_dir.display()))? {
        entries.push(e.with_context(|| format!("reading {}", data_dir.display()))?.file_name().to_string_lossy().into_owned());
    }
    // A new volume's root holds only `lost+found`: empty for a restore.
    if entries.iter().any(|n| n != "lost+found") && !force {
        bail!("the data directory {} is not empty; pass --force to replace it", data_dir.display());
    }
    // `lost+found`: the root of an ext4-formatted volume (the chart mounts one here).
    let ours = |n: &str| n == DB_FILE || n == storage::search::SEARCH_DIR || n == "lost+found" || n.starts_with(&format!("{DB_FILE}."));
    let mut foreign: Vec<&String> = entries.iter().filter(|n| !ours(n)).collect();
    if !foreign.is_empty() {
        foreign.sort();
        bail!(
            "{} does not look like a data directory (it holds {}); refusing to replace it even with --force",
            data_dir.display(),
            foreign.iter().take(5).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        );
    }
    if data_dir.join(DB_FILE).exists() {
        if let Err(StorageError::Locked(path)) = Store::open(data_dir) {
            bail!("the database {path} is held by a running server; stop it before restoring");
        }
    }
    Ok(())
}

/// The name of a restore's staging directory inside the data directory, before the restoring
/// process's id (`DIR/.restore-<pid>`).
pub const STAGING_PREFIX: &str = ".restore-";

/// Removes the staging directories (`DIR/.restore-<pid>`) that killed restores left in
/// `data_dir`, logging each one with its size; returns their paths. Only under the data
/// directory's lock ([`lock_data_dir`]): a restore in progress holds it.
///
/// # Errors
/// A leftover that cannot be read or removed.
fn remove_restore_leftovers(data_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e).with_context(|| format!("reading {}", data_dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", data_dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(STAGING_PREFIX) {
            continue;
        }
        let path = entry.path();
        // Only directories are staging directories (a symbolic link is never followed).
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            tracing::warn!(path = %path.display(), "not a staging directory (not a directory); left alone");
            continue;
        }
        let bytes = size_of_tree(&path);
        std::fs::remove_dir_all(&path).with_context(|| format!("removing {}, left by a restore that did not end", path.display()))?;
        tracing::warn!(path = %path.display(), bytes, "removed the staging directory of a restore that did not end (killed or crashed)");
        removed.push(path);
    }
    Ok(removed)
}

/// What an offline command writes and has not finished ([`Unfinished`]), by the command's id:
/// a termination signal removes it ([`remove_unfinished_on_termination`]).
static UNFINISHED: std::sync::Mutex<Vec<Unfinished>> = std::sync::Mutex::new(Vec::new());

/// Woken when an [`Unfinished`] that was being moved into place ends.
static UNFINISHED_ENDED: std::sync::Condvar = std::sync::Condvar::new();

fn unfinished() -> std::sync::MutexGuard<'static, Vec<Unfinished>> {
    UNFINISHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one offline `snapshot restore` or `export` writes and has not finished: a restore's
/// staging directory (and the data directory, when the restore created it) or an export's
/// `.partial` file.
struct Unfinished {
    id: u64,
    /// Removed whole.
    output: PathBuf,
    /// Removed when empty (a data directory the restore created).
    created: Option<PathBuf>,
    /// Being moved into place: a signal waits for it to end.
    moving: bool,
}

/// An [`Unfinished`] registered for the time a command writes it; its registration ends when
/// this is dropped (the output moved into place, or removed after an error).
struct Writing(u64);

impl Writing {
    fn begin(output: PathBuf, created: Option<PathBuf>) -> Writing {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        unfinished().push(Unfinished { id, output, created, moving: false });
        Writing(id)
    }

    /// Runs `create`, which makes the directory the output is written in and returns it when it
    /// made it, and registers that directory to be removed with the output; a signal comes
    /// before or after both (the registry is held meanwhile), never between.
    fn creating(&self, create: impl FnOnce() -> Result<Option<PathBuf>>) -> Result<Option<PathBuf>> {
        let mut all = unfinished();
        let created = create()?;
        if let Some(u) = all.iter_mut().find(|u| u.id == self.0) {
            u.created.clone_from(&created);
        }
        Ok(created)
    }

    /// Runs `make`, which makes the output or directories in it, while it is unfinished: the
    /// registry is held meanwhile, so a signal removes the output before or after, never
    /// between. After a signal removed it, never returns (the signal's thread ends the
    /// process): what it made then would be left behind.
    fn while_unfinished<T>(&self, make: impl FnOnce() -> Result<T>) -> Result<T> {
        let _held = self.registered();
        make()
    }

    /// The registry, held, and the index of this output in it. Never returns when a signal
    /// already removed the output (its thread ends the process).
    fn registered(&self) -> (std::sync::MutexGuard<'static, Vec<Unfinished>>, usize) {
        let all = unfinished();
        match all.iter().position(|u| u.id == self.0) {
            Some(at) => (all, at),
            None => {
                drop(all);
                loop {
                    std::thread::park();
                }
            }
        }
    }

    /// Keeps the directory [`Writing::creating`] made from removal by a signal: another
    /// process may use it.
    fn keep_created(&self) {
        if let Some(u) = unfinished().iter_mut().find(|u| u.id == self.0) {
            u.created = None;
        }
    }

    /// Marks the output as being moved into place: a termination signal from now on waits for
    /// the moves, and the command ends as they do. Never returns when a signal already removed
    /// the output (its thread ends the process).
    fn moving(&self) {
        let (mut all, at) = self.registered();
        all[at].moving = true;
    }
}

/// Whether an output was moved into place in this process: the command has done its work, and
/// a signal after it lets it end as it does.
static MOVED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Drop for Writing {
    fn drop(&mut self) {
        let mut all = unfinished();
        if all.iter().any(|u| u.id == self.0 && u.moving) {
            MOVED.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        all.retain(|u| u.id != self.0);
        UNFINISHED_ENDED.notify_all();
    }
}

/// Makes SIGTERM and SIGINT end an offline `snapshot export` or `restore` without leaving what it
/// had not finished: a thread of its own waits for either, removes the unfinished output
/// ([`Unfinished`]), logs it, and ends the process with status 143 (SIGTERM) or 130 (SIGINT),
/// as their default action would. A signal while the finished output is moved into place waits
/// for the moves and lets the command end as it does (0 once moved); nothing is removed then.
/// Without it, a restore stopped by a signal left its staging directory until the next
/// `restore` or `serve`.
///
/// # Errors
/// The signals cannot be listened for, or the thread cannot start.
pub fn remove_unfinished_on_termination() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the signal listener")?;
    let (mut term, mut int) = {
        let _entered = rt.enter();
        (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?)
    };
    std::thread::Builder::new().name("cp-signals".into()).spawn(move || {
        let (name, status) = rt.block_on(async {
            tokio::select! {
                _ = term.recv() => ("SIGTERM", 143),
                _ = int.recv() => ("SIGINT", 130),
            }
        });
        if remove_unfinished(name) {
            std::process::exit(status);
        }
    })?;
    Ok(())
}

/// What a termination signal `signal` does to the unfinished outputs: waits while one is moved
/// into place; then removes every one left (and the data directories their restores created,
/// when empty) and returns `true`, the process to end. `false` when nothing is left unfinished
/// and an output was moved into place: the command has done its work and ends as it does.
fn remove_unfinished(signal: &str) -> bool {
    let mut all = unfinished();
    if all.iter().any(|u| u.moving) {
        tracing::warn!(signal, "a signal during the final moves: they are finished first");
        while all.iter().any(|u| u.moving) {
            all = UNFINISHED_ENDED.wait(all).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
    if all.is_empty() && MOVED.load(std::sync::atomic::Ordering::SeqCst) {
        return false;
    }
    for u in all.drain(..) {
        let removed = remove_path(&u.output);
        if let Some(dir) = u.created {
            let _ = std::fs::remove_dir(dir);
        }
        tracing::warn!(signal, path = %u.output.display(), removed, "stopped by a signal: removed what was not finished");
    }
    true
}

/// Removes the file or directory `path`, trying a directory again while other threads of this
/// process still create files in it; whether it is gone.
fn remove_path(path: &Path) -> bool {
    for _ in 0..5 {
        let removed = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(e) => Err(e),
        };
        if removed.is_ok() {
            return true;
        }
    }
    !path.exists()
}

/// The bytes of the files under `path` (for the log; unreadable entries count 0).
fn size_of_tree(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of_tree(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Prints a summary (for `verify`, `export` and `restore`).
///
/// # Errors
/// When writing fails.
pub fn print_summary(out: &mut impl Write, s: &Summary) -> std::io::Result<()> {
    writeln!(out, "format version:    {}", s.format)?;
    writeln!(out, "schema version:    {}", s.header.schema_version)?;
    writeln!(out, "revision:          {}", s.header.revision)?;
    writeln!(out, "created at:        {}", s.header.created_at.to_rfc3339())?;
    writeln!(out, "size:              {} bytes", s.bytes)?;
    let total: u64 = s.header.counts.iter().map(|(_, c)| c).sum();
    writeln!(out, "records:           {total}")?;
    for (kind, n) in s.header.counts.iter().filter(|(_, n)| *n > 0) {
        writeln!(out, "  {kind:<22} {n}")?;
    }
    for kind in s.header.rederived_kinds() {
        let version = s.header.kind_version(kind).map_or("none".to_string(), |v| v.to_string());
        writeln!(
            out,
            "re-derived after restore: {} (derivation version {version} in the snapshot; from its source documents when the snapshot carries them, else read again from the source)",
            kind.name()
        )?;
    }
    Ok(())
}

/// `path` with `.name` appended to its file name, as a hidden sibling (`dir/.data.name`).
fn sibling(path: &Path, name: &str) -> PathBuf {
    let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "data".into());
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parent.join(format!(".{file}.{name}"))
}

fn now() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_removed_or_replaced_before_its_lock_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let opened = std::fs::File::open(&data).unwrap();
        std::fs::remove_dir(&data).unwrap();
        let removed = lock_opened(opened, &data).err().expect("removed");
        assert!(removed.to_string().contains("was removed or replaced"), "{removed:#}");

        std::fs::create_dir(&data).unwrap();
        let opened = std::fs::File::open(&data).unwrap();
        std::fs::rename(&data, tmp.path().join("old")).unwrap();
        std::fs::create_dir(&data).unwrap();
        assert!(lock_opened(opened, &data).is_err(), "another directory under the same name");

        let lock = lock_data_dir(&data).unwrap();
        assert!(lock_data_dir(&data).err().expect("held").to_string().contains("is in use by another process"));
        drop(lock);
        assert!(lock_data_dir(&data).is_ok());
    }

    #[test]
    fn a_restore_created_its_data_directory_only_when_its_own_mkdir_made_it() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("parent").join("data");
        assert_eq!(create_target(&data).unwrap(), Some(std::fs::canonicalize(&data).unwrap()), "made with its parent");
        assert_eq!(create_target(&data).unwrap(), None, "a second restore into it did not create it");
        // `new` does not exist, yet the path names the existing `data`.
        let through = tmp.path().join("parent").join("new").join("..").join("data");
        assert_eq!(create_target(&through).unwrap(), None);
        assert!(data.is_dir());
        std::fs::write(tmp.path().join("file"), "").unwrap();
        assert!(create_target(&tmp.path().join("file")).is_err(), "a file is not a data directory");
    }

    /// The one test of the process-wide registry of unfinished outputs (tests of it running in
    /// parallel would share it).
    #[test]
    fn a_signal_removes_unfinished_outputs_and_lets_a_moved_one_end() {
        let tmp = tempfile::tempdir().unwrap();
        // Being written: removed, and the data directory its restore created with it.
        let created = tmp.path().join("created");
        let staging = created.join(format!("{STAGING_PREFIX}1"));
        std::fs::create_dir_all(staging.join(storage::search::SEARCH_DIR)).unwrap();
        std::fs::write(staging.join(DB_FILE), "pages").unwrap();
        let kept = tmp.path().join("kept");
        std::fs::create_dir_all(kept.join(format!("{STAGING_PREFIX}2"))).unwrap();
        std::fs::write(kept.join(DB_FILE), "the old store").unwrap();
        let restoring = Writing::begin(staging.clone(), Some(created.clone()));
        let other = Writing::begin(kept.join(format!("{STAGING_PREFIX}2")), Some(kept.clone()));
        assert!(remove_unfinished("SIGTERM"), "nothing was moved: the process ends");
        assert!(!created.exists(), "the staging directory and the directory created for it");
        assert!(!kept.join(format!("{STAGING_PREFIX}2")).exists());
        assert_eq!(std::fs::read_to_string(kept.join(DB_FILE)).unwrap(), "the old store", "a directory not empty stays");
        assert!(unfinished().is_empty());
        drop((restoring, other));

        // A directory made by the registered creation goes with the output; one that existed stays.
        let made = tmp.path().join("made");
        let writing = Writing::begin(made.join(format!("{STAGING_PREFIX}3")), None);
        assert!(writing.creating(|| create_target(&made)).unwrap().is_some());
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let existing = Writing::begin(empty.join(format!("{STAGING_PREFIX}4")), None);
        assert_eq!(existing.creating(|| create_target(&empty)).unwrap(), None);
        assert!(remove_unfinished("SIGTERM"));
        assert!(!made.exists() && empty.is_dir());
        drop((writing, existing));

        // Being moved into place: the signal waits for the move, removes nothing, and lets the
        // command end (whether it came before or after the move ended).
        let partial = tmp.path().join(".out.snap.partial");
        std::fs::write(&partial, "snapshot").unwrap();
        let writing = Writing::begin(partial.clone(), None);
        writing.moving();
        let signal = std::thread::spawn(|| remove_unfinished("SIGINT"));
        std::fs::rename(&partial, tmp.path().join("out.snap")).unwrap();
        drop(writing);
        assert!(!signal.join().unwrap(), "the command ends as it does");
        assert_eq!(std::fs::read_to_string(tmp.path().join("out.snap")).unwrap(), "snapshot");
    }
}
