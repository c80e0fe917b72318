//! The connection table of an event loop (epoll in [`super::event_loop`], io_uring in
//! [`super::uring`]): connections in a slab, each slot stamped with a generation. A token
//! carries both, so an event, completion or job result that arrives after its connection has
//! gone — its slot perhaps reused by a new connection — is recognised and dropped.

use slab::Slab;
use std::ops::{Index, IndexMut};

/// The loop's connections.
#[derive(Debug)]
pub struct ConnTable<C> {
    slots: Slab<Slot<C>>,
    next_gen: u32,
}

#[derive(Debug)]
struct Slot<C> {
    generation: u32,
    conn: C,
}

impl<C> ConnTable<C> {
    /// An empty table with room for `capacity` connections before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        ConnTable { slots: Slab::with_capacity(capacity), next_gen: 0 }
    }

    /// Adds a connection; returns its key.
    pub fn insert(&mut self, conn: C) -> usize {
        self.next_gen = self.next_gen.wrapping_add(1);
        self.slots.insert(Slot { generation: self.next_gen, conn })
    }

    /// The token naming the connection at `key` (its generation and key).
    pub fn token(&self, key: usize) -> u64 {
        (u64::from(self.slots[key].generation) << 32) | key as u64
    }

    /// The key of the connection `token` names, if it is still there.
    pub fn live_key(&self, token: u64) -> Option<usize> {
        let key = (token & 0xffff_ffff) as usize;
        match self.slots.get(key) {
            Some(s) if s.generation == (token >> 32) as u32 => Some(key),
            _ => None,
        }
    }

    /// Removes the connection at `key` (which must be there).
    pub fn remove(&mut self, key: usize) -> C {
        self.slots.remove(key).conn
    }

    /// Removes the connection at `key`, if there is one.
    pub fn try_remove(&mut self, key: usize) -> Option<C> {
        self.slots.try_remove(key).map(|s| s.conn)
    }

    /// Connections open.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// No connection is open.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every connection with its key.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &C)> {
        self.slots.iter().map(|(k, s)| (k, &s.conn))
    }

    /// Every connection with its key, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut C)> {
        self.slots.iter_mut().map(|(k, s)| (k, &mut s.conn))
    }
}

impl<C> Index<usize> for ConnTable<C> {
    type Output = C;
    fn index(&self, key: usize) -> &C {
        &self.slots[key].conn
    }
}

impl<C> IndexMut<usize> for ConnTable<C> {
    fn index_mut(&mut self, key: usize) -> &mut C {
        &mut self.slots[key].conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_outlives_its_connection_only_as_a_stranger() {
        let mut t = ConnTable::with_capacity(2);
        let a = t.insert("a");
        let token_a = t.token(a);
        assert_eq!(t.live_key(token_a), Some(a));
        assert_eq!(t.remove(a), "a");
        assert_eq!(t.live_key(token_a), None, "a gone connection's token");
        let b = t.insert("b");
        assert_eq!(b, a, "the slot is reused");
        assert_eq!(t.live_key(token_a), None, "the old token names the new connection");
        assert_eq!(t.live_key(t.token(b)), Some(b));
        assert_eq!(t[b], "b");
        assert_eq!(t.try_remove(a + 1), None);
        assert_eq!((t.len(), t.is_empty()), (1, false));
    }
}
