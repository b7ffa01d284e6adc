//! A command list's node with several owners: the application's [`crate::CommandList`] and
//! every outer list that executes it (nested execution, R-C3). The node stays where it is,
//! behind a pointer, while any owner is left; whoever gives up the last one gets the node
//! back as the `Box` it was, and ends the list the way a single owner's drop always did
//! ([`Shareable::last_owner_gone`]). A count rather than an `Arc` for that reason: the node
//! must come back whole, to go on to its context's lock-free list of destroyed lists and be
//! recycled, not be freed.
//!
//! # Orderings, once
//! As `Arc`'s: taking another owner is Relaxed (the taker already owns one, which keeps the
//! node alive); giving one up is a Release decrement, and the thread that brings the count to
//! zero issues an Acquire fence before it touches the node (an owner that reads, with an
//! Acquire load, that it is the only one left skips the decrement: nobody can share it
//! meanwhile), so everything every owner did through the node (the immediate context's
//! stamps of the buffers that executed it, included) happens before the node is ended.
//!
//! The loom model below runs this code with owners given up on two threads at once.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use crate::lists::recycle::Node;
use crate::primitive::{fence, AtomicUsize, Ordering};

/// How many owners a shared node has; carried in the node's value.
#[derive(Debug, Default)]
pub(crate) struct Owners(AtomicUsize);

/// More owners than this is a leak of owners (each costs a recorded operation, so no real
/// program gets near): the process aborts, as `Arc` does, rather than let the count wrap.
const MAX_OWNERS: usize = isize::MAX as usize;

/// A value that lives in a shared node.
pub(crate) trait Shareable: Sized {
    /// The value's owner count.
    fn owners(&self) -> &Owners;

    /// The last owner is gone: `node` is this thread's alone again. Runs once per
    /// [`Shared::new`].
    fn last_owner_gone(node: Box<Node<Self>>);
}

/// One owner of a shared node. Dropping it gives the ownership up; the last drop runs
/// [`Shareable::last_owner_gone`].
pub(crate) struct Shared<T: Shareable> {
    node: NonNull<Node<T>>,
    /// Owns a share of the node (drop check, auto traits by the impls below).
    _owns: PhantomData<Node<T>>,
}

// SAFETY: as `Arc<T>`: an owner reaches `&T` from any thread, and the last one, on any
// thread, gets the `T` itself.
unsafe impl<T: Shareable + Send + Sync> Send for Shared<T> {}
// SAFETY: as above; `&Shared` gives `&T` and lets another owner be taken.
unsafe impl<T: Shareable + Send + Sync> Sync for Shared<T> {}

impl<T: Shareable> Shared<T> {
    /// The first owner of `node`, which nothing else reaches.
    pub(crate) fn new(node: Box<Node<T>>) -> Self {
        // No other thread sees the node yet: the store publishes nothing.
        node.value.owners().0.store(1, Ordering::Relaxed);
        Shared {
            node: NonNull::from(Box::leak(node)),
            _owns: PhantomData,
        }
    }

    /// The shared value.
    #[inline]
    pub(crate) fn get(&self) -> &T {
        // SAFETY: this owner keeps the count above zero, so the node is neither ended nor
        // moved (only the last owner takes it back, `release`); all access through owners is
        // shared.
        unsafe { &self.node.as_ref().value }
    }

    /// Another owner of the same node.
    pub(crate) fn share(&self) -> Self {
        // Relaxed: this owner keeps the node alive, and a new owner publishes nothing.
        let before = self.get().owners().0.fetch_add(1, Ordering::Relaxed);
        if before >= MAX_OWNERS {
            std::process::abort();
        }
        Shared {
            node: self.node,
            _owns: PhantomData,
        }
    }

    /// Gives this owner up; the node when it was the last one (the caller ends it; no
    /// [`Shareable::last_owner_gone`] runs here).
    pub(crate) fn release(self) -> Option<Box<Node<T>>> {
        let this = ManuallyDrop::new(self);
        let owners = &this.get().owners().0;
        // The only owner (the common case: a list nothing executes): no other owner is left
        // to take another (only an owner can, and this one is given up by value), so the
        // count cannot change and needs no decrement; it is set again when the node is
        // shared anew (`new`). Acquire, as the fence below: the end happens after what every
        // earlier owner did (each gave itself up with a Release decrement, which this load
        // reads from).
        if owners.load(Ordering::Acquire) != 1 {
            // Release: what this owner did through the node happens before its end.
            if owners.fetch_sub(1, Ordering::Release) != 1 {
                return None;
            }
            // Acquire: the end happens after what every other owner did.
            fence(Ordering::Acquire);
        }
        // SAFETY: the count reached zero here, so no owner is left and no reference through
        // one is alive; the pointer came from `Box::leak` in `new` and is taken back once.
        Some(unsafe { Box::from_raw(this.node.as_ptr()) })
    }
}

impl<T: Shareable> Drop for Shared<T> {
    fn drop(&mut self) {
        let this = Shared {
            node: self.node,
            _owns: PhantomData,
        };
        if let Some(node) = this.release() {
            T::last_owner_gone(node);
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdCount;

    struct Counted {
        owners: Owners,
        value: u32,
    }

    static ENDED: StdCount = StdCount::new(0);

    impl Shareable for Counted {
        fn owners(&self) -> &Owners {
            &self.owners
        }
        fn last_owner_gone(node: Box<Node<Self>>) {
            assert_eq!(node.value.value, 7);
            ENDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The node ends once, when its last owner goes, whichever that is and on whichever
    /// thread; `release` hands it back instead of ending it.
    #[test]
    fn the_last_owner_ends_the_node_once() {
        let first = Shared::new(Node::new(Counted {
            owners: Owners::default(),
            value: 7,
        }));
        let second = first.share();
        let third = second.share();
        let before = ENDED.load(std::sync::atomic::Ordering::Relaxed);
        drop(first);
        std::thread::spawn(move || {
            assert_eq!(second.get().value, 7);
            drop(second)
        })
        .join()
        .unwrap();
        assert_eq!(ENDED.load(std::sync::atomic::Ordering::Relaxed), before);
        let again = third.share();
        assert!(third.release().is_none(), "another owner is left");
        let node = again.release().expect("the last owner gets the node back");
        assert_eq!(
            ENDED.load(std::sync::atomic::Ordering::Relaxed),
            before,
            "release ends nothing itself"
        );
        let revived = Shared::new(node);
        drop(revived);
        assert_eq!(ENDED.load(std::sync::atomic::Ordering::Relaxed), before + 1);
    }
}

#[cfg(test)]
#[cfg(loom)]
mod loom_models {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::thread;

    /// A value whose contents the owners read and the end writes: a loom cell, so an end
    /// not ordered after every owner's reads is a reported race.
    struct Cell {
        owners: Owners,
        contents: UnsafeCell<u32>,
    }

    impl Shareable for Cell {
        fn owners(&self) -> &Owners {
            &self.owners
        }
        fn last_owner_gone(mut node: Box<Node<Self>>) {
            // SAFETY: loom checks this write against every owner's read.
            node.value.contents.with_mut(|p| unsafe { *p = 0 });
        }
    }

    fn read(owner: &Shared<Cell>) -> u32 {
        // SAFETY: loom checks this read against the end's write.
        owner.get().contents.with(|p| unsafe { *p })
    }

    /// Two threads each take an owner, read through it and give it up, while the first owner
    /// goes too: exactly one of them ends the node, after all three reads.
    #[test]
    fn loom_the_last_owner_ends_after_every_other_owner() {
        loom::model(|| {
            let first = Shared::new(Node::new(Cell {
                owners: Owners::default(),
                contents: UnsafeCell::new(5),
            }));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let mine = first.share();
                    thread::spawn(move || {
                        assert_eq!(read(&mine), 5, "read after the end");
                        drop(mine);
                    })
                })
                .collect();
            assert_eq!(read(&first), 5);
            drop(first);
            for t in threads {
                t.join().unwrap();
            }
        });
    }
}
