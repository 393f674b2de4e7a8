//! Buffers shared between processes (Buffer::export_ipc, Context::import_ipc,
//! IpcHandle, BufferInfo::imported), with this binding on both sides: the
//! other process is this test binary again, running the test `ipc_child`
//! (a no-op in a normal run) with VYRE_CUDA_RUST_IPC_CHILD=1, which takes
//! commands on stdin and answers on stdout, one line each:
//!
//!   import <hex> <bytes> <expect seed> <write seed>
//!       imports the handle, checks its info and every byte against
//!       `seeded(bytes, expect seed)`, checks that the import cannot be
//!       exported again, writes `seeded(bytes, write seed)` into it, frees it:
//!       "ipc-child ok <bytes>"
//!   export <bytes> <seed>   a buffer of `seeded(bytes, seed)`, exported:
//!                           "ipc-child ok <hex>" (the buffer is kept)
//!   expect <seed>           compares that buffer with `seeded(bytes, seed)`:
//!                           "ipc-child ok"
//!   free                    drops it: "ipc-child ok"
//!   exit                    ends the test (which passes)
//!
//! A failed check panics, so the child exits non-zero and the parent, reading
//! end of file instead of an answer, fails. On the fake driver the exported
//! memory is shared through POSIX shared memory, on a GPU through CUDA.
//! Every byte is random (fresh seeds each run), none zero.

#[macro_use]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use common::*;
use vyre_cuda::{Buffer, Context, IpcHandle, Status};

/// Marks the child process.
const CHILD: &str = "VYRE_CUDA_RUST_IPC_CHILD";
/// Marks the child's answers (libtest prints its own lines too, and
/// "test ipc_child ... " before the first answer).
const ANSWER: &str = "ipc-child ";

/// `n` pseudo-random bytes from `seed`, none zero.
fn seeded(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| loop {
            let b = (rng.next_u64() >> 56) as u8;
            if b != 0 {
                break b;
            }
        })
        .collect()
}

/// A fresh seed for each call.
fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    now ^ (u64::from(std::process::id()) << 32) ^ COUNT.fetch_add(1, Ordering::Relaxed)
}

/// Panics at the first byte of `got` that differs from `want`.
fn assert_same(got: &[u8], want: &[u8], label: &str) {
    assert_eq!(got.len(), want.len(), "{label}: length");
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        let bad = (0..want.len()).filter(|&i| got[i] != want[i]).count();
        panic!(
            "{label}: {bad} of {} bytes wrong; first at {i}: {:#04x}, expected {:#04x}",
            want.len(),
            got[i],
            want[i]
        );
    }
}

// ---------------------------------------------------------------------------
// The child's side
// ---------------------------------------------------------------------------

#[test]
fn ipc_child() {
    if std::env::var(CHILD).as_deref() != Ok("1") {
        return; // a normal run: nothing to do
    }
    let ctx = Context::new(0).expect("the child's context");
    let mut exported: Option<(Buffer, usize)> = None;
    let answer = |text: &str| {
        println!("{ANSWER}{text}");
        std::io::stdout().flush().unwrap();
    };
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| words[i].parse::<u64>().unwrap();
        match words.first().copied() {
            Some("import") => {
                let handle = IpcHandle::from_hex(words[1]).unwrap();
                let (bytes, expect_seed, write_seed) = (num(2) as usize, num(3), num(4));
                let import = ctx.import_ipc(&handle).unwrap();
                let info = import.info().unwrap();
                assert!(info.borrowed && info.imported, "{info:?}");
                assert_eq!(info.bytes, bytes as u64);
                assert_eq!(import.len_bytes(), bytes as u64);
                assert_same(
                    &import.to_vec::<u8>().unwrap(),
                    &seeded(bytes, expect_seed),
                    "the child's import",
                );
                let e = assert_error(import.export_ipc(), Status::InvalidArgument);
                assert!(
                    e.message()
                        .contains("an import of memory another process exported"),
                    "{e}"
                );
                import.upload(0, &seeded(bytes, write_seed)).unwrap();
                import.free().unwrap();
                answer(&format!("ok {bytes}"));
            }
            Some("export") => {
                let (bytes, seed) = (num(1) as usize, num(2));
                let buffer = ctx.upload(&seeded(bytes, seed)).unwrap();
                let handle = buffer.export_ipc().unwrap();
                exported = Some((buffer, bytes));
                answer(&format!("ok {}", handle.to_hex()));
            }
            Some("expect") => {
                let (buffer, bytes) = exported.as_ref().expect("expect before export");
                assert_same(
                    &buffer.to_vec::<u8>().unwrap(),
                    &seeded(*bytes, num(1)),
                    "the child's exported buffer",
                );
                answer("ok");
            }
            Some("free") => {
                exported
                    .take()
                    .expect("free before export")
                    .0
                    .free()
                    .unwrap();
                answer("ok");
            }
            Some("exit") => break,
            _ => panic!("the child got {line:?}"),
        }
    }
    drop(exported);
    assert_no_misuse();
    drop(ctx);
}

// ---------------------------------------------------------------------------
// The parent's side
// ---------------------------------------------------------------------------

/// This test binary, running `ipc_child`.
struct Peer {
    process: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn start() -> Peer {
        let mut process = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "ipc_child", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the child process");
        let stdin = process.stdin.take();
        let stdout = BufReader::new(process.stdout.take().unwrap());
        Peer {
            process,
            stdin,
            stdout,
        }
    }

    /// Sends one command and returns the answer after "ipc-child ok".
    fn ask(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(
                n > 0,
                "the child ended without answering {:?} (its stderr is above)",
                command.split(' ').next().unwrap()
            );
            // libtest's "test ipc_child ... " may start the first line.
            if let Some(at) = line.find(ANSWER) {
                let answer = line[at + ANSWER.len()..].trim_end();
                let rest = answer
                    .strip_prefix("ok")
                    .unwrap_or_else(|| panic!("the child answered {answer:?}"));
                return rest.trim().to_string();
            }
        }
    }

    /// Sends "exit" and checks that the child passed.
    fn finish(mut self) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "exit").unwrap();
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        let status = self.process.wait().unwrap();
        assert!(status.success(), "the child failed ({status}):\n{rest}");
        assert!(
            rest.contains("test result: ok. 1 passed"),
            "the child ran nothing:\n{rest}"
        );
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if std::thread::panicking() {
            let _ = self.process.kill();
        }
        let _ = self.process.wait();
    }
}

/// We export a buffer; the child imports it, checks it and writes into it;
/// its write is in our memory.
fn child_imports(ctx: &Context, bytes: usize) {
    let (seed, write_seed) = (fresh_seed(), fresh_seed());
    let owner = ctx.upload(&seeded(bytes, seed)).unwrap();
    let info = owner.info().unwrap();
    assert!(!info.borrowed && !info.imported, "{info:?}");
    let handle = owner.export_ipc().unwrap();
    assert_eq!(
        owner.export_ipc().unwrap(),
        handle,
        "exporting one buffer twice gave different handles"
    );
    assert_eq!(IpcHandle::from_bytes(handle.as_bytes()).unwrap(), handle);
    assert_eq!(IpcHandle::from_hex(&handle.to_hex()).unwrap(), handle);
    assert_eq!(
        IpcHandle::from_hex(&handle.to_hex().to_uppercase()).unwrap(),
        handle
    );
    assert_eq!(IpcHandle::try_from(handle.as_ref()).unwrap(), handle);
    assert_eq!(IpcHandle::from(handle.raw()), handle);

    let mut peer = Peer::start();
    let answer = peer.ask(&format!(
        "import {} {bytes} {seed} {write_seed}",
        handle.to_hex()
    ));
    assert_eq!(answer, bytes.to_string());
    peer.finish();
    assert_same(
        &owner.to_vec::<u8>().unwrap(),
        &seeded(bytes, write_seed),
        "the exporter's buffer after the child wrote through its import",
    );
    owner.free().unwrap();
}

#[test]
fn child_imports_our_export_and_writes_back() {
    with_context!(ctx);
    child_imports(&ctx, 4096);
    child_imports(&ctx, 100_003); // not a multiple of anything
    assert_no_misuse();
}

#[test]
fn we_import_the_child_export_once_mapped_twice_held() {
    with_context!(ctx);
    for bytes in [4096usize, 70_001] {
        let (seed, write_seed) = (fresh_seed(), fresh_seed());
        let mut peer = Peer::start();
        let handle = IpcHandle::from_hex(&peer.ask(&format!("export {bytes} {seed}"))).unwrap();

        let first = ctx.import_ipc(&handle).unwrap();
        let second = ctx.import_ipc(&handle).unwrap();
        let (info1, info2) = (first.info().unwrap(), second.info().unwrap());
        assert!(info1.borrowed && info1.imported, "{info1:?}");
        assert_eq!(info1.bytes, bytes as u64);
        assert_eq!(first.len_bytes(), bytes as u64);
        assert_eq!(
            info1.device_pointer, info2.device_pointer,
            "one handle, one mapping"
        );
        assert_same(
            &first.to_vec::<u8>().unwrap(),
            &seeded(bytes, seed),
            "our import",
        );

        // An import is not this process's to export.
        let e = assert_error(first.export_ipc(), Status::InvalidArgument);
        assert!(
            e.message()
                .contains("an import of memory another process exported"),
            "{e}"
        );

        // A device copy out of the mapping.
        let local = ctx.alloc(bytes as u64).unwrap();
        second.copy_to(&local, 0, 0, bytes as u64).unwrap();
        assert_same(
            &local.to_vec::<u8>().unwrap(),
            &seeded(bytes, seed),
            "a copy out of our import",
        );

        // Dropping one import leaves the other's mapping working; the child
        // reads what we wrote.
        first.free().unwrap();
        second.upload(0, &seeded(bytes, write_seed)).unwrap();
        peer.ask(&format!("expect {write_seed}"));

        // An import in a second context, gone with it: the child's memory
        // stays.
        {
            let other = Context::new(ctx.device_info().unwrap().ordinal).unwrap();
            let third = other.import_ipc(&handle).unwrap();
            assert!(third.info().unwrap().imported);
        }
        drop(second);
        peer.ask(&format!("expect {write_seed}"));
        peer.ask("free");
        peer.finish();
    }
    assert_no_misuse();
}

#[test]
fn import_after_the_exporter_freed_or_exited_is_refused() {
    with_context!(ctx);
    for exits in [false, true] {
        let mut peer = Peer::start();
        let handle =
            IpcHandle::from_hex(&peer.ask(&format!("export 4096 {}", fresh_seed()))).unwrap();
        let refused = || {
            // The message's wording is the library's; its status and Fix are
            // the contract.
            let e = assert_error(ctx.import_ipc(&handle), Status::InvalidArgument);
            assert_eq!(e.call(), "vyre_buffer_import_ipc");
        };
        if exits {
            peer.finish();
            refused();
        } else {
            peer.ask("free");
            refused();
            peer.finish();
        }
    }
    assert_no_misuse();
}

#[test]
fn refusals_in_one_process() {
    with_context!(ctx);
    let buffer = ctx.upload(&seeded(4096, fresh_seed())).unwrap();
    let handle = buffer.export_ipc().unwrap();

    // CUDA does not open a handle in the process that exported it.
    let e = assert_error(ctx.import_ipc(&handle), Status::InvalidArgument);
    assert!(e.message().contains("exported by this process"), "{e}");

    // Bytes that are not a handle.
    let mut corrupted = handle;
    corrupted.0[40] ^= 0x10;
    let e = assert_error(ctx.import_ipc(&corrupted), Status::InvalidArgument);
    assert!(e.message().contains("checksum does not match"), "{e}");
    let e = assert_error(
        ctx.import_ipc(&IpcHandle([0; IpcHandle::LEN])),
        Status::InvalidArgument,
    );
    assert!(e.message().contains("no handle marker"), "{e}");

    // Wrong lengths and text, refused before the library sees them.
    for n in [0usize, 1, IpcHandle::LEN - 1, IpcHandle::LEN + 1] {
        let e = assert_error(
            IpcHandle::from_bytes(&vec![7u8; n]),
            Status::InvalidArgument,
        );
        assert!(e.message().contains(&format!("not {n}")), "{e}");
        assert_eq!(e.call(), "IpcHandle::from_bytes");
    }
    let hex = handle.to_hex();
    for bad in [
        String::new(),
        hex[..hex.len() - 2].to_string(),
        format!("{hex}00"),
        format!("zz{}", &hex[2..]),
        format!("+1{}", &hex[2..]),
        format!("é{}", &hex[2..]),
    ] {
        assert_error(IpcHandle::from_hex(&bad), Status::InvalidArgument);
    }
    assert_eq!(IpcHandle::LEN, 128);
    assert_eq!(format!("{handle:?}"), format!("IpcHandle({hex})"));
    buffer.free().unwrap();
    assert_no_misuse();
}
