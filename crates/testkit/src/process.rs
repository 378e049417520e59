//! A test server's own process: spawned, polled until it serves, and killed with SIGKILL as a
//! crash would. The servers of this crate (`redis`, `redis_topology`, `milvus`) differ only in
//! the command they run and in what "serving" means, so that is all they say.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Spawns `command` and polls `ready` (given the child's process id) every `poll` until it
/// answers true. `None` when the process exits first — most likely its port was taken between
/// the pick and the bind, so the caller tries another — or when `within` passes (it is killed).
/// A command that cannot run at all panics with `install`, the hint that makes it runnable.
pub(crate) fn start_ready(
    command: &mut Command,
    install: &str,
    within: Duration,
    poll: Duration,
    mut ready: impl FnMut(u32) -> bool,
) -> Option<Child> {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => panic!("cannot run {:?} ({e}); {install}", command.get_program()),
    };
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if ready(child.id()) {
            return Some(child);
        }
        std::thread::sleep(poll);
    }
    stop(&mut Some(child));
    None
}

/// Kills the process at once (SIGKILL) and reaps it; nothing when it is already gone.
pub(crate) fn stop(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        // Reaps it (an exited child's status is already kept: `wait` returns it).
        let _ = child.wait();
    }
}

/// Calls `attempt` every `poll` until it answers true; panics saying `what` never did within
/// `within` (a test's precondition, not a measurement).
pub(crate) fn until(
    what: &str,
    within: Duration,
    poll: Duration,
    mut attempt: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if attempt() {
            return;
        }
        std::thread::sleep(poll);
    }
    panic!("{what} never became ready within {within:?}");
}
