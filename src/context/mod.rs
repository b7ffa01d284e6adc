//! The user-facing types and what only they use: the [`Device`](device::Device) and its
//! [`ImmediateContext`](immediate::ImmediateContext), the
//! [`DeferredContext`](deferred::DeferredContext)s and the
//! [`CommandList`](command_list::CommandList)s they finish, and the immediate context's
//! amortised-processing policy, a deferred context's pool of list memory (which holds
//! lists, and so the device) and the walk through nested lists. These refer to one another (a context knows its device, a
//! list its context's pool, the device its immediate context's clocks); the references stay
//! inside this folder, and everything below it (registry, lists, context-local handles)
//! depends on none of them.

pub(crate) mod amortize;
pub(crate) mod command_list;
pub(crate) mod deferred;
pub(crate) mod device;
pub(crate) mod driver_side;
pub(crate) mod immediate;
pub(crate) mod list_pool;
pub(crate) mod list_walk;
pub(crate) mod mapped_and_begun;
