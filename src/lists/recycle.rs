//! The lock-free list of a deferred context's destroyed command lists (R-R4, R-R5, R-R7).
//!
//! Any thread that destroys a command list pushes its node (one CAS); the context's own
//! thread takes the whole list at once at Finish (one swap) and recycles what the
//! submission clock allows. Nodes are boxes that live as long as their context: a recycled
//! node is reused for a later list, so steady state allocates nothing.
//!
//! When the context is dropped it *closes* the list: one swap installs a closed mark as the
//! head and takes what was pushed. A push CASes against the head it read, so it either lands
//! before the close (and the closer takes it) or sees the mark and is refused, handing the
//! node straight back to the pusher: none is stranded, and the pusher never touches the
//! stack after its node was published (so it needs no reference of its own to keep the
//! stack alive). Push is ABA-safe (Treiber push with take-all consumers), so the head needs
//! no tag.
//!
//! Loom models check that every pushed node is taken exactly once, with and without a close.

use core::ptr;

use crate::primitive::{AtomicPtr, Ordering};

/// A node of the stack.
pub(crate) struct Node<T> {
    next: *mut Node<T>,
    /// The payload.
    pub(crate) value: T,
}

// SAFETY: `next` is only read or written by whoever owns the node's `Box` (the pusher before
// publishing it, the taker after detaching it), so a node moves between threads like its
// value.
unsafe impl<T: Send> Send for Node<T> {}
// SAFETY: through `&Node` only `value` is reachable (`next` is private to the stack), so
// sharing a node is sharing its value.
unsafe impl<T: Sync> Sync for Node<T> {}

impl<T> Node<T> {
    pub(crate) fn new(value: T) -> Box<Self> {
        Box::new(Node {
            next: ptr::null_mut(),
            value,
        })
    }
}

/// Many producers push nodes; the owner takes them all; closing hands later pushes back.
pub(crate) struct DropStack<T> {
    /// The newest node, null when empty, or [`closed`] once closed.
    head: AtomicPtr<Node<T>>,
}

/// The head of a closed stack: an address no node has (nodes are aligned past 1).
fn closed<T>() -> *mut Node<T> {
    ptr::without_provenance_mut(1)
}

const _: () = assert!(core::mem::align_of::<Node<u8>>() > 1);

// SAFETY: the stack owns the nodes linked from `head` (each was a `Box` given up by `push`)
// and hands each back as a `Box` exactly once; moving `T`s between threads that way needs
// only `T: Send`.
unsafe impl<T: Send> Send for DropStack<T> {}
// SAFETY: as above; all shared access goes through the atomic head.
unsafe impl<T: Send> Sync for DropStack<T> {}

/// Nodes taken from the stack, newest first.
pub(crate) struct Taken<T> {
    top: *mut Node<T>,
}

impl<T> Iterator for Taken<T> {
    type Item = Box<Node<T>>;

    fn next(&mut self) -> Option<Box<Node<T>>> {
        if self.top.is_null() {
            return None;
        }
        // SAFETY: every non-null pointer in a taken chain came from `Box::into_raw` in `push`,
        // was published by the pusher's Release CAS and acquired by the taker's swap, and is
        // owned by this chain alone (the swap detached it from the stack).
        let mut node = unsafe { Box::from_raw(self.top) };
        self.top = core::mem::replace(&mut node.next, ptr::null_mut());
        Some(node)
    }
}

impl<T> Drop for Taken<T> {
    #[inline]
    fn drop(&mut self) {
        for _ in self.by_ref() {}
    }
}

impl<T> DropStack<T> {
    pub(crate) fn new() -> Self {
        DropStack {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Pushes `node` (any thread); a closed stack refuses it and hands it back.
    pub(crate) fn push(&self, node: Box<Node<T>>) -> Result<(), Box<Node<T>>> {
        let node = Box::into_raw(node);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head == closed() {
                // SAFETY: `node` came from `Box::into_raw` above and was never published.
                return Err(unsafe { Box::from_raw(node) });
            }
            // SAFETY: `node` came from `Box::into_raw` just above and is not published yet,
            // so this thread owns it.
            unsafe { (*node).next = head };
            // Release: the taker that acquires the head sees the node's contents.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => head = now,
            }
        }
    }

    /// Takes every pushed node (one swap); nothing once closed. The owner's call (the owner
    /// alone closes the stack, so no close races it).
    pub(crate) fn take_all(&self) -> Taken<T> {
        let head = self.head.load(Ordering::Relaxed);
        if head.is_null() || head == closed() {
            return Taken {
                top: ptr::null_mut(),
            };
        }
        Taken {
            top: self.head.swap(ptr::null_mut(), Ordering::Acquire),
        }
    }

    /// Whether the stack looks empty (a relaxed hint: a racing push is seen next time).
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Whether the stack was closed (its owner is gone): a hint, a push finds out for sure.
    pub(crate) fn is_closed(&self) -> bool {
        self.head.load(Ordering::Relaxed) == closed()
    }

    /// Closes the stack and takes what it holds; later pushes are refused.
    pub(crate) fn close(&self) -> Taken<T> {
        let top = self.head.swap(closed(), Ordering::Acquire);
        Taken {
            top: if top == closed() {
                ptr::null_mut()
            } else {
                top
            },
        }
    }
}

impl<T> Drop for DropStack<T> {
    fn drop(&mut self) {
        drop(self.close());
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn take_all_returns_every_push_once() {
        let s = DropStack::new();
        for i in 0..5 {
            assert!(s.push(Node::new(i)).is_ok());
        }
        let got: Vec<i32> = s.take_all().map(|n| n.value).collect();
        assert_eq!(got, vec![4, 3, 2, 1, 0]);
        assert_eq!(s.take_all().count(), 0);
    }

    #[test]
    fn pushes_after_close_come_back_to_the_pusher() {
        let s = DropStack::new();
        assert!(s.push(Node::new(1)).is_ok());
        assert_eq!(s.close().map(|n| n.value).collect::<Vec<_>>(), vec![1]);
        assert!(s.is_closed());
        let back = s.push(Node::new(2)).expect_err("closed");
        assert_eq!(back.value, 2);
        assert_eq!(s.close().count(), 0, "closing again takes nothing");
        assert_eq!(s.take_all().count(), 0, "a closed stack gives nothing");
        assert!(s.is_closed(), "and stays closed");
    }

    #[test]
    fn threads_push_while_owner_takes() {
        let per = if cfg!(miri) { 20 } else { 5000 };
        let s = Arc::new(DropStack::new());
        let pushers: Vec<_> = (0..2)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        assert!(s.push(Node::new(t * per + i)).is_ok());
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 2 * per {
            seen.extend(s.take_all().map(|n| n.value));
        }
        for p in pushers {
            p.join().unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..2 * per).collect::<Vec<_>>());
    }
}

#[cfg(test)]
#[cfg(loom)]
mod loom_models {
    use super::*;
    use loom::sync::Arc;

    /// Two producers push while the owner takes all: every node is taken exactly once.
    #[test]
    fn loom_drop_stack_many_producers_one_taker() {
        loom::model(|| {
            let s = Arc::new(DropStack::new());
            let producers: Vec<_> = (0..2)
                .map(|i| {
                    let s = s.clone();
                    loom::thread::spawn(move || assert!(s.push(Node::new(i)).is_ok()))
                })
                .collect();
            let mut seen: Vec<i32> = s.take_all().map(|n| n.value).collect();
            for p in producers {
                p.join().unwrap();
            }
            seen.extend(s.take_all().map(|n| n.value));
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1]);
        });
    }

    /// A push racing the owner's close: the node ends up with exactly one of them.
    #[test]
    fn loom_drop_stack_push_racing_close_strands_nothing() {
        loom::model(|| {
            let s = Arc::new(DropStack::new());
            let pusher = {
                let s = s.clone();
                loom::thread::spawn(move || usize::from(s.push(Node::new(7)).is_err()))
            };
            let closer = s.close().count();
            let pusher = pusher.join().unwrap();
            assert_eq!(closer + pusher, 1, "the node is taken exactly once");
        });
    }
}
