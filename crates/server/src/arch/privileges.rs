//! Giving up root once the listening sockets are bound: `--chroot`, then `--user`/`--group`.
//!
//! **Default.** Without `--user` the server keeps the identity it was started with. Started as
//! root it says so in one line of the error log (a warning) (`--allow-root` silences it) but serves: refusing
//! would break every existing set-up that runs it as root, containers and CI among them. With
//! `--user`, failing to switch (not started as root, unknown user) is fatal: exit status 2
//! before the listening line is printed, never serving as the wrong user.

use crate::config::Config;
use amped_sys::privileges::{chroot, effective_uid, switch_to};
use std::io;

/// Applies `--chroot` and `--user`/`--group` (in that order), or warns about serving as root.
pub fn give_up(cfg: &Config) -> io::Result<()> {
    if let Some(dir) = &cfg.chroot {
        chroot(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("--chroot {}: {e}", dir.display())))?;
    }
    match cfg.run_as {
        Some(id) => switch_to(id).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot switch to uid {} gid {}: {e}", id.uid, id.gid))
        }),
        None => {
            if effective_uid() == 0 && !cfg.allow_root && !cfg.is_mp_worker() {
                crate::errlog::warn!(
                    "serving as root; --user USER switches to an unprivileged user once bound (--allow-root silences this)"
                );
            }
            Ok(())
        }
    }
}
