//! Raising the open-file limit so that thousands of connections fit (10,000 is a goal; the
//! soft limit is usually 1024 while the hard limit allows far more).

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; refuses in one line when even the hard
/// limit is below `needed`.
pub fn raise_nofile(needed: u64) -> Result<(), String> {
    let limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum
        && hard < needed
    {
        return Err(format!(
            "this run needs about {needed} file descriptors but the hard RLIMIT_NOFILE is {hard}; \
             use fewer --connections or raise the limit (ulimit -Hn)"
        ));
    }
    let current = limit.maximum.or(limit.current.map(|soft| soft.max(needed)));
    if current == limit.current {
        return Ok(());
    }
    setrlimit(Resource::Nofile, Rlimit { current, maximum: limit.maximum })
        .map_err(|e| format!("cannot raise RLIMIT_NOFILE to {needed}: {e}"))
}
