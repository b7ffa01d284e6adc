//! The user-facing types and what only they use: the [`Device`](device::Device) and its
//! [`ImmediateContext`](immediate::ImmediateContext), the
//! [`DeferredContext`](deferred::DeferredContext)s and the
//! [`CommandList`](command_list::CommandList)s they finish, and the immediate context's
//! amortised-processing policy, a deferred context's pool of list memory (which holds
//! lists, and so the device) and the walk through nested lists. These refer to one another (a context knows its device, a
//! list its context's pool, the device its immediate context's clocks); the references stay
//! inside this folder, and everything below it (registry, lists, context-local handles)
//! depends on none of them.

/// A public call of a context, recorded in the device's capture (feature `capture`): `$call`
/// (a [`crate::capture::Call`]) starts its record first thing, `$body` makes the call, and its
/// answer ends the record. Without the feature, `$body` alone.
macro_rules! captured {
    ($context:ident, $call:expr, $body:expr) => {{
        #[cfg(feature = "capture")]
        $context.capture_begin($call);
        let result = $body;
        #[cfg(feature = "capture")]
        $context.capture_end(&result);
        result
    }};
    // A call that answers a value besides success: the value recorded after it where it
    // succeeded (`Call::Answer`).
    (answer $context:ident, $call:expr, $body:expr) => {{
        #[cfg(feature = "capture")]
        $context.capture_begin($call);
        let result = $body;
        #[cfg(feature = "capture")]
        {
            $context.capture_end(&result);
            $context.capture_answer(&result);
        }
        result
    }};
}

pub(crate) mod amortize;
pub(crate) mod command_list;
pub(crate) mod deferred;
pub(crate) mod device;
pub(crate) mod driver_side;
pub(crate) mod immediate;
pub(crate) mod list_pool;
pub(crate) mod list_walk;
pub(crate) mod mapped_and_begun;
