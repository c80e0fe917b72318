//! `kernel.task_delayacct` shared between amplab runs. A profiled run turns it on; it goes off
//! again only when the last run holding it ends, and never if it was on before the first. The
//! runs holding it, and the setting found before the first of them, are kept in a state file
//! under /run (`/run/amplab-delayacct`) that every run changes under an exclusive `flock`. A
//! holder whose process is gone (a run that was killed) is dropped the next time a run reads
//! the file, so a crashed run cannot keep the setting on for good.

use std::fs::OpenOptions;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A run holding delay accounting on: its process id and its start time (clock ticks after
/// boot, `/proc/PID/stat` field 22), so that a reused pid is not taken for a run that died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pid: u32,
    start: u64,
}

impl Holder {
    /// The calling process.
    pub fn this_process() -> Option<Holder> {
        Holder::of(std::process::id())
    }

    /// The process `pid`, if it runs.
    pub fn of(pid: u32) -> Option<Holder> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 1..];
        let start = rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()?;
        Some(Holder { pid, start })
    }

    fn alive(&self) -> bool {
        Holder::of(self.pid) == Some(*self)
    }
}

/// What the state file says: the setting before the first holder, and the holders.
#[derive(Debug, Default, PartialEq)]
struct State {
    /// `None` while nobody holds it (an empty file).
    was_on: Option<bool>,
    holders: Vec<Holder>,
}

impl State {
    fn parse(text: &str) -> State {
        let mut state = State::default();
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            match (f.next(), f.next()) {
                (Some("was_on"), Some(v)) => state.was_on = Some(v == "1"),
                (Some(pid), Some(start)) => {
                    if let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) {
                        state.holders.push(Holder { pid, start });
                    }
                }
                _ => {}
            }
        }
        state
    }

    fn render(&self) -> String {
        let Some(was_on) = self.was_on else { return String::new() };
        let mut s = format!("was_on {}\n", u8::from(was_on));
        for h in &self.holders {
            s.push_str(&format!("{} {}\n", h.pid, h.start));
        }
        s
    }
}

/// The sysctl and the state file the runs share.
pub struct DelayAcct {
    sysctl: PathBuf,
    state: PathBuf,
}

impl DelayAcct {
    /// The machine's: `/proc/sys/kernel/task_delayacct` and `/run/amplab-delayacct`.
    pub fn system() -> DelayAcct {
        DelayAcct::at(
            Path::new("/proc/sys/kernel/task_delayacct"),
            Path::new("/run/amplab-delayacct"),
        )
    }

    /// Another sysctl file and state file (tests).
    pub fn at(sysctl: &Path, state: &Path) -> DelayAcct {
        DelayAcct { sysctl: sysctl.to_path_buf(), state: state.to_path_buf() }
    }

    /// Whether delay accounting is on.
    pub fn is_on(&self) -> bool {
        std::fs::read_to_string(&self.sysctl).is_ok_and(|v| v.trim() == "1")
    }

    fn set(&self, on: bool) -> io::Result<()> {
        std::fs::write(&self.sysctl, if on { "1" } else { "0" })
    }

    /// Adds `holder` and turns delay accounting on if it is off; returns whether it turned
    /// it on. An error (not root, no /run) leaves everything as it was.
    pub fn acquire(&self, holder: Holder) -> io::Result<bool> {
        self.locked(|state| {
            state.holders.retain(Holder::alive);
            // The first holder notes the setting it found; after a crashed run (holders all
            // gone, the note kept) the note stands, as that run turned it on.
            state.was_on.get_or_insert_with(|| self.is_on());
            let turn_on = !self.is_on();
            if turn_on {
                self.set(true)?;
                state.was_on = Some(false);
            }
            if !state.holders.contains(&holder) {
                state.holders.push(holder);
            }
            Ok(turn_on)
        })
    }

    /// Drops `holder` (and any holder that is gone); when none is left, turns delay accounting
    /// off unless it was on before the first. Returns whether it turned it off.
    pub fn release(&self, holder: Holder) -> io::Result<bool> {
        self.locked(|state| {
            state.holders.retain(|h| *h != holder && h.alive());
            if !state.holders.is_empty() {
                return Ok(false);
            }
            let turn_off = state.was_on == Some(false) && self.is_on();
            if turn_off {
                self.set(false)?;
            }
            state.was_on = None;
            Ok(turn_off)
        })
    }

    /// Runs `change` on the state file's contents under an exclusive lock and writes the
    /// result back.
    fn locked<T>(&self, change: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.state)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let mut state = State::parse(&text);
        let out = change(&mut state)?;
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(state.render().as_bytes())?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    fn machine(on: bool) -> (tempfile::TempDir, DelayAcct) {
        let dir = tempfile::tempdir().unwrap();
        let sysctl = dir.path().join("task_delayacct");
        std::fs::write(&sysctl, if on { "1\n" } else { "0\n" }).unwrap();
        let acct = DelayAcct::at(&sysctl, &dir.path().join("amplab-delayacct"));
        (dir, acct)
    }

    fn other_run() -> (Child, Holder) {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let holder = Holder::of(child.id()).unwrap();
        (child, holder)
    }

    #[test]
    fn two_overlapping_runs_leave_it_on_until_the_last_one_ends() {
        let (_dir, acct) = machine(false);
        let (mut b_proc, b) = other_run();
        let a = Holder::this_process().unwrap();
        assert!(acct.acquire(a).unwrap(), "the first run turns it on");
        assert!(!acct.acquire(b).unwrap(), "the second finds it on");
        assert!(!acct.release(a).unwrap());
        assert!(acct.is_on(), "the first run's end leaves it on for the second");
        assert!(acct.release(b).unwrap());
        assert!(!acct.is_on(), "the last run's end turns it off");
        b_proc.kill().unwrap();
        b_proc.wait().unwrap();
    }

    #[test]
    fn a_setting_that_was_on_before_stays_on() {
        let (_dir, acct) = machine(true);
        let a = Holder::this_process().unwrap();
        assert!(!acct.acquire(a).unwrap());
        assert!(!acct.release(a).unwrap());
        assert!(acct.is_on());
    }

    #[test]
    fn a_run_that_died_holding_it_does_not_keep_it_on() {
        let (_dir, acct) = machine(false);
        let (mut b_proc, b) = other_run();
        assert!(acct.acquire(b).unwrap(), "the run that will die turns it on");
        b_proc.kill().unwrap();
        b_proc.wait().unwrap();
        let a = Holder::this_process().unwrap();
        assert!(!acct.acquire(a).unwrap(), "on already, and noted as amplab's doing");
        assert!(acct.release(a).unwrap(), "the dead holder is dropped: off at the end");
        assert!(!acct.is_on());
    }

    #[test]
    fn the_state_file_reads_back_what_it_wrote() {
        let s = State { was_on: Some(false), holders: vec![Holder { pid: 7, start: 99 }] };
        assert_eq!(State::parse(&s.render()), s);
        assert_eq!(State::parse(""), State::default());
        assert_eq!(State::default().render(), "");
    }
}
