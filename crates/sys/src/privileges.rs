//! Running as another user: name lookups (`getpwnam_r`, `getgrnam_r`), an optional `chroot`,
//! and the one-way switch from root to an unprivileged user and group once the listening
//! sockets are bound (the way a server binds port 80 and then stops being root).
//!
//! The switch is `setgroups([gid])`, `setgid`, `setuid`, in that order (after `setuid` the
//! process could no longer change its groups), then a check that root cannot be regained.
//! glibc applies each call to every thread of the process.

use std::ffi::CString;
use std::io;
use std::path::Path;

/// A user and group to run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// The user named `name` (or a numeric uid): its uid and primary group.
pub fn lookup_user(name: &str) -> io::Result<Identity> {
    let c = CString::new(name).map_err(|_| invalid("user name contains NUL"))?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: passwd is a plain C struct; all-zero is a valid initial value.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pwd`'s strings
    // (only the numeric fields are read below).
    let rc = unsafe {
        libc::getpwnam_r(c.as_ptr(), &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut found)
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if !found.is_null() {
        return Ok(Identity { uid: pwd.pw_uid, gid: pwd.pw_gid });
    }
    match name.parse::<u32>() {
        Ok(uid) => Ok(Identity { uid, gid: uid }),
        Err(_) => Err(invalid("no such user")),
    }
}

/// The group named `name` (or a numeric gid).
pub fn lookup_group(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| invalid("group name contains NUL"))?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: group is a plain C struct; all-zero is a valid initial value.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; only the numeric gid is read afterwards.
    let rc = unsafe {
        libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut found)
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if !found.is_null() {
        return Ok(grp.gr_gid);
    }
    name.parse::<u32>().map_err(|_| invalid("no such group"))
}

/// The effective user id of the process.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Confines the process to `dir` (`chroot`, then `chdir("/")`). Needs root; do it before
/// [`switch_to`].
pub fn chroot(dir: &Path) -> io::Result<()> {
    let c = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| invalid("path contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::chroot(c.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")
}

/// Switches every thread of the process to `id` for good. A no-op when the process already
/// runs as exactly `id` (an `mp` worker re-executed by a parent that switched already).
pub fn switch_to(id: Identity) -> io::Result<()> {
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let euid = effective_uid();
    if uid == id.uid && euid == id.uid && gid == id.gid {
        return Ok(());
    }
    let groups = [id.gid as libc::gid_t];
    // SAFETY: `groups` is a valid array of one gid for the duration of the call.
    if unsafe { libc::setgroups(1, groups.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain syscalls on integers.
    if unsafe { libc::setgid(id.gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::setuid(id.uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above. Regaining root must now fail (unless the target is root itself).
    if id.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("root could be regained after switching user"));
    }
    Ok(())
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_numeric_ids_resolve() {
        assert_eq!(lookup_user("root").unwrap(), Identity { uid: 0, gid: 0 });
        assert_eq!(lookup_user("4321").unwrap(), Identity { uid: 4321, gid: 4321 });
        assert_eq!(lookup_group("0").unwrap(), 0);
        assert!(lookup_user("no-such-user-amped").is_err());
        assert!(lookup_group("no-such-group-amped").is_err());
    }
}
