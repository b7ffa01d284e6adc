//! A deferred context's cache of the `VkBuffer`s behind the allocations its calls look up.
//!
//! Why: a draw looks up its constants', vertices' and target's buffers, and the world's
//! allocation table is behind a lock every thread reads. Two deferred contexts recording
//! at once each wrote the lock's word a few times a draw, so the line went back and forth
//! between their cores; and each lookup hashed the id. The cache answers a repeat from the
//! context's own memory.
//!
//! Why it stays right: an allocation's id is never given to another allocation (ids count
//! up) and its buffer does not change while it lives, so an entry can only go stale by its
//! allocation being taken (deallocated). The world counts those; a count other than the
//! one the cache was filled under empties the cache, so a taken allocation is looked up in
//! the table again and found gone.

use ash::vk;

use cmdlist::AllocationHandle;

use crate::world::VulkanWorld;

/// Entries kept: a draw names three resources, and a few draws in a row share them.
const WAYS: usize = 8;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct BufferCache {
    /// The world's count of taken allocations when the entries were filled.
    taken: u64,
    /// Allocation id (0: empty) and its buffer.
    entries: [(u64, vk::Buffer); WAYS],
    /// The entry the next miss replaces.
    next: usize,
}

impl BufferCache {
    /// The buffer behind `allocation`, as [`VulkanWorld::buffer_of`] answers it.
    pub(crate) fn buffer_of(
        &mut self,
        world: &VulkanWorld,
        allocation: AllocationHandle,
    ) -> Option<vk::Buffer> {
        let taken = world.allocations_taken();
        if taken != self.taken {
            *self = BufferCache {
                taken,
                ..BufferCache::default()
            };
        }
        let id = allocation.0.get();
        if let Some(&(_, buffer)) = self.entries.iter().find(|e| e.0 == id) {
            return Some(buffer);
        }
        let (buffer, _) = world.buffer_of(allocation)?;
        self.entries[self.next] = (id, buffer);
        self.next = (self.next + 1) % WAYS;
        Some(buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmdlist::{AllocationDesc, Kernel};

    /// Against the world's own answers, through more allocations than the cache keeps, and
    /// after one is deallocated: found gone, not answered from the cache.
    #[test]
    fn answers_as_the_table_does_and_forgets_a_deallocated_allocation() {
        let (_driver, kernel, world) = match crate::new(crate::VulkanConfig::default()) {
            Ok(parts) => parts,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let desc = AllocationDesc {
            size: 64,
            shared: false,
            primary: false,
        };
        let allocations: Vec<_> = (0..WAYS + 3)
            .map(|_| kernel.allocate(&desc).unwrap())
            .collect();
        let mut cache = BufferCache::default();
        for _ in 0..2 {
            for &a in &allocations {
                let table = world.buffer_of(a).map(|(buffer, _)| buffer);
                assert!(table.is_some());
                assert_eq!(cache.buffer_of(&world, a), table);
            }
        }
        let gone = allocations[WAYS + 2];
        assert!(cache.buffer_of(&world, gone).is_some(), "cached");
        kernel.deallocate(gone);
        assert_eq!(cache.buffer_of(&world, gone), None);
        assert_eq!(
            cache.buffer_of(&world, allocations[0]),
            world.buffer_of(allocations[0]).map(|(buffer, _)| buffer)
        );
        for &a in &allocations[..WAYS + 2] {
            kernel.deallocate(a);
        }
        world.wait_gpu().unwrap();
        assert!(world.violations().is_empty(), "{:?}", world.violations());
    }

    /// What the cache is for: a repeat answered from its own entries, not from the table.
    /// The last `WAYS` allocations looked up are all kept (each miss takes the next entry in
    /// turn, the oldest one's), and a deallocation empties the cache once, not for good: the
    /// lookups after it are kept again, under the world's new count.
    #[test]
    fn keeps_the_last_allocations_looked_up_across_a_deallocation() {
        let (_driver, kernel, world) = match crate::new(crate::VulkanConfig::default()) {
            Ok(parts) => parts,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let desc = AllocationDesc {
            size: 64,
            shared: false,
            primary: false,
        };
        let allocations: Vec<_> = (0..WAYS + 2)
            .map(|_| kernel.allocate(&desc).unwrap())
            .collect();
        let mut cache = BufferCache::default();
        let holds = |cache: &BufferCache, a: AllocationHandle| {
            cache.entries.iter().any(|&(id, _)| id == a.0.get())
        };
        for &a in &allocations[..WAYS] {
            cache.buffer_of(&world, a).unwrap();
        }
        assert!(allocations[..WAYS].iter().all(|&a| holds(&cache, a)));
        cache.buffer_of(&world, allocations[WAYS]).unwrap();
        assert!(!holds(&cache, allocations[0]), "the oldest replaced");
        assert!(allocations[1..=WAYS].iter().all(|&a| holds(&cache, a)));
        kernel.deallocate(allocations[WAYS + 1]);
        for &a in &allocations[..2] {
            cache.buffer_of(&world, a).unwrap();
        }
        assert_eq!(cache.taken, world.allocations_taken());
        assert!(allocations[..2].iter().all(|&a| holds(&cache, a)));
        for &a in &allocations[..=WAYS] {
            kernel.deallocate(a);
        }
        world.wait_gpu().unwrap();
        assert!(world.violations().is_empty(), "{:?}", world.violations());
    }
}
