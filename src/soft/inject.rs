//! Fault injection: a [`Driver`] and a [`Kernel`] that wrap another driver and kernel and make
//! one chosen hook call panic or fail, for tests of what the engine promises after a hook
//! panics or fails: no object destroyed and no memory freed twice (R-D1), no memory reused
//! before its clock allows (R-D1, R-D4), holds and allocations released (R-H2), device
//! destruction still complete (R-D3), a failure kept a failure of its kind (R-E1).
//!
//! # Counting and injecting
//! A [`FaultPlan`] is shared (an [`Arc`]) by a [`FaultDriver`] and a [`FaultKernel`]. Every
//! hook call of either counts once on the plan (one relaxed atomic add), numbered from 0 in
//! the order the calls begin. When the number reaches the plan's target, the call injects
//! the plan's [`Fault`]:
//! - [`Fault::Panic`]: the hook panics with an [`InjectedPanic`] payload, recognisable with
//!   [`InjectedPanic::of`]; [`silence_injected_panics`] keeps them out of test output.
//! - [`Fault::Error`]: a hook that returns a `Result` returns that error; any other hook
//!   runs normally ([`Hit::injected`] says that nothing was injected).
//! - [`Fault::WrongLength`]: [`Driver::map_discard_deferred`] runs and returns its memory
//!   one byte short of the length asked (a driver's error the engine must refuse, R-E1);
//!   any other hook runs normally, as at a [`Fault::Error`] that injects nothing.
//! - [`Fault::Pause`]: the hook waits before its inner hook runs until the test calls
//!   [`FaultPlan::resume`] ([`FaultPlan::wait_paused`] waits for it to get there), so a test
//!   can act from another thread while a call is inside a hook.
//!
//! A test runs its scenario once with [`FaultPlan::counting`] to learn how many calls it
//! makes (and, [`FaultPlan::with_log`], which hook each one is), then once per call number
//! with [`FaultPlan::at`] on a fresh world.
//!
//! # Where in a hook the fault lands
//! A hook that creates, opens, allocates, submits, executes or answers something faults
//! *before* the inner hook runs: the hook did nothing, so whatever the soft world finds
//! afterwards is the engine's doing. A hook that releases something
//! ([`Driver::destroy_object`], [`Kernel::deallocate`], [`Driver::destroy_deferred_context`],
//! [`Driver::destroy_command_list`], [`Driver::recycle_destroy_command_list`],
//! [`Driver::recycle_command_list`], [`Driver::close_local`]) runs the inner hook first and
//! then panics: the release happened, so the engine must neither repeat it (a double
//! destroy or free) nor skip the releases after it (a leak), the way std's collections treat
//! a panicking `Drop`.
//!
//! # Device creation
//! [`Driver::threading_caps`] and [`Driver::check_deferred_context_handle_sizes`] run at
//! device creation; they are neither counted nor injected unless the plan asks for it
//! ([`FaultPlan::with_device_creation`]). [`Driver::create_immediate`] is always counted, so
//! a scenario must expect [`crate::Device::new`] to fail (or panic) at its call.
//!
//! # Wrapping a driver
//! The wrapper has its inner driver's associated types. Two hooks take arguments typed by
//! the driver itself (`Resolver<'_, Self>`, `Op<'_, Self>`), which a wrapper cannot pass on
//! as they are: a driver that wants to be wrapped implements those two once, generically
//! over the driver the engine runs ([`Wrappable`]), and calls that from its own hooks.
//!
//! # Example
//! ```
//! use std::panic::{catch_unwind, AssertUnwindSafe};
//! use std::sync::Arc;
//!
//! use cmdlist::soft::inject::{self, Fault, FaultPlan, InjectedPanic};
//! use cmdlist::soft::SoftConfig;
//! use cmdlist::{Device, DeviceConfig, ResourceDesc};
//!
//! inject::silence_injected_panics();
//! // Call 0 is device creation's create_immediate; call 1 is the resource's size query.
//! let plan = Arc::new(FaultPlan::at(1, Fault::Panic));
//! let (driver, kernel, world) = inject::new(&plan, SoftConfig::default());
//! let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default())?;
//! let desc = ResourceDesc { byte_size: 64, ..Default::default() };
//! let caught = catch_unwind(AssertUnwindSafe(|| device.create_resource(desc))).unwrap_err();
//! assert_eq!(InjectedPanic::of(&*caught).map(|p| p.hook), Some("calc_private_size"));
//! assert_eq!(plan.hit().map(|h| (h.call, h.hook)), Some((1, "calc_private_size")));
//! ic.destroy_device()?;
//! world.assert_clean();
//! # Ok::<(), cmdlist::Error>(())
//! ```

use core::fmt;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, OnceLock};

use super::{SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use crate::bind::{BindPoint, StateView};
use crate::caps::ThreadingCaps;
use crate::cls::local_handles::LocalHandles;
use crate::desc::ObjectDesc;
use crate::driver::{DeferredCall, Driver, ListMemory, Op};
use crate::dxgi::{
    BltCaps, BltPlan, DisplayModeCallback, DisplayModeOutcome, GammaCaps, PresentCallback,
    PresentStatus, ResidencyStatus,
};
use crate::error::{Error, Result};
use crate::handle::{Handle, HandleSize, HandleType, Resource};
use crate::kernel::{AllocationDesc, AllocationHandle, ContextId, DeferredId, Kernel, Submission};
use crate::registry::{ObjectView, Resolver};

/// What to inject at the target call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The hook panics with an [`InjectedPanic`] payload.
    Panic,
    /// A hook that returns a `Result` returns this error (R-E1: its kind is the one the
    /// engine must pass on); other hooks run normally.
    Error(Error),
    /// [`Driver::map_discard_deferred`] runs, then returns the first `len - 1` bytes of its
    /// memory (of a resource of at least one byte): memory of the wrong length, which the
    /// engine must refuse (R-E1). Other hooks run normally.
    WrongLength,
    /// The hook waits, before its inner hook runs, until [`FaultPlan::resume`]; meanwhile
    /// [`FaultPlan::wait_paused`] returns. For tests of what other threads may do while a
    /// call is inside a hook (drop the immediate context, destroy objects).
    Pause,
}

/// The call that reached a plan's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Its number (from 0).
    pub call: u64,
    /// The hook's name: the [`Driver`] or [`Kernel`] method's.
    pub hook: &'static str,
    /// Whether a fault was injected (an [`Fault::Error`] at a hook without a `Result` is
    /// not, nor a [`Fault::WrongLength`] at any hook but [`Driver::map_discard_deferred`]).
    pub injected: bool,
}

/// The payload of an injected panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectedPanic {
    /// The call's number.
    pub call: u64,
    /// The hook's name.
    pub hook: &'static str,
}

impl InjectedPanic {
    /// The injected panic a caught panic's payload carries, if it is one.
    pub fn of(payload: &(dyn Any + Send)) -> Option<&InjectedPanic> {
        payload.downcast_ref()
    }
}

impl fmt::Display for InjectedPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected panic in {} (call {})", self.hook, self.call)
    }
}

/// Installs, once per process, a panic hook that prints nothing for [`InjectedPanic`]s and
/// hands every other panic to the hook that was installed before. Safe to call from tests
/// running in parallel.
pub fn silence_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<InjectedPanic>().is_none() {
                previous(info);
            }
        }));
    });
}

/// Which call to fault and how, shared by a [`FaultDriver`] and a [`FaultKernel`]; counts
/// the calls. See the module docs.
#[derive(Debug)]
pub struct FaultPlan {
    target: Option<u64>,
    fault: Fault,
    device_creation: bool,
    calls: AtomicU64,
    hit: OnceLock<Hit>,
    log: Option<Mutex<Vec<&'static str>>>,
    pause: (Mutex<Paused>, Condvar),
}

/// Where a [`Fault::Pause`] stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Paused {
    /// The target call has not come.
    #[default]
    NotYet,
    /// The target call waits in its hook.
    Waiting,
    /// Resumed (before or after the call came): the call goes on, or does not wait.
    Resumed,
}

impl FaultPlan {
    /// A plan that only counts (a scenario's reference run).
    pub fn counting() -> Self {
        FaultPlan {
            target: None,
            fault: Fault::Panic,
            device_creation: false,
            calls: AtomicU64::new(0),
            hit: OnceLock::new(),
            log: None,
            pause: (Mutex::new(Paused::NotYet), Condvar::new()),
        }
    }

    /// A plan that injects `fault` at call number `call` (from 0).
    pub fn at(call: u64, fault: Fault) -> Self {
        FaultPlan {
            target: Some(call),
            fault,
            ..FaultPlan::counting()
        }
    }

    /// Also records the name of every hook called, in call order ([`FaultPlan::log`]). Each
    /// call then takes a lock: for reference runs.
    pub fn with_log(mut self) -> Self {
        self.log = Some(Mutex::new(Vec::new()));
        self
    }

    /// Also counts (and may inject in) [`Driver::threading_caps`] and
    /// [`Driver::check_deferred_context_handle_sizes`], which run at device creation.
    pub fn with_device_creation(mut self) -> Self {
        self.device_creation = true;
        self
    }

    /// The target call, if any.
    pub fn target(&self) -> Option<u64> {
        self.target
    }

    /// The fault injected at the target call.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Hook calls counted so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The call that reached the target, once one did.
    pub fn hit(&self) -> Option<Hit> {
        self.hit.get().copied()
    }

    /// Whether a fault was injected.
    pub fn injected(&self) -> bool {
        self.hit().is_some_and(|h| h.injected)
    }

    /// Returns once the target call waits in its hook ([`Fault::Pause`]).
    pub fn wait_paused(&self) {
        let (state, changed) = &self.pause;
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        while *state == Paused::NotYet {
            state = changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets the paused call go on ([`Fault::Pause`]); a target call that comes later does
    /// not wait.
    pub fn resume(&self) {
        let (state, changed) = &self.pause;
        *state.lock().unwrap_or_else(|e| e.into_inner()) = Paused::Resumed;
        changed.notify_all();
    }

    /// The target call of a [`Fault::Pause`]: waits until resumed.
    fn pause_here(&self) {
        let (state, changed) = &self.pause;
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        if *state == Paused::NotYet {
            *state = Paused::Waiting;
            changed.notify_all();
        }
        while *state != Paused::Resumed {
            state = changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The hooks called so far, in call order (empty without [`FaultPlan::with_log`]).
    pub fn log(&self) -> Vec<&'static str> {
        match &self.log {
            Some(log) => log.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Vec::new(),
        }
    }

    /// Counts one call of `hook`; at the target, panics or (for a hook that can fail,
    /// `fallible`) returns the error.
    #[inline]
    fn tick(&self, hook: &'static str, fallible: bool) -> Result<()> {
        self.tick_sized(hook, fallible, false).map(drop)
    }

    /// [`FaultPlan::tick`] for a hook that hands out memory (`sized`): also answers whether
    /// to hand it out one byte short ([`Fault::WrongLength`] at the target).
    #[inline]
    fn tick_sized(&self, hook: &'static str, fallible: bool, sized: bool) -> Result<bool> {
        let call = match &self.log {
            None => self.calls.fetch_add(1, Ordering::Relaxed),
            Some(log) => {
                // Under the lock, so that the log's order is the numbering's.
                let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                log.push(hook);
                self.calls.fetch_add(1, Ordering::Relaxed)
            }
        };
        if Some(call) != self.target {
            return Ok(false);
        }
        let injected = match self.fault {
            Fault::Panic => true,
            Fault::Error(_) => fallible,
            Fault::WrongLength => sized,
            Fault::Pause => true,
        };
        let _ = self.hit.set(Hit {
            call,
            hook,
            injected,
        });
        match self.fault {
            Fault::Panic => std::panic::panic_any(InjectedPanic { call, hook }),
            Fault::Error(error) if fallible => Err(error),
            Fault::Error(_) => Ok(false),
            Fault::WrongLength => Ok(sized),
            Fault::Pause => {
                self.pause_here();
                Ok(false)
            }
        }
    }

    /// [`FaultPlan::tick`] for a hook without a `Result`.
    #[inline]
    fn tick_infallible(&self, hook: &'static str) {
        let _ = self.tick(hook, false);
    }
}

/// A driver with the same associated types as `D`: the drivers whose engine-typed hook
/// arguments (`Resolver`, `Op`) a [`Wrappable`] driver `D` accepts.
pub trait SameTypes<D: Driver>:
    Driver<
    Object = D::Object,
    IcData = D::IcData,
    Immediate = D::Immediate,
    Command = D::Command,
    Deferred = D::Deferred,
>
{
}

impl<D: Driver, W> SameTypes<D> for W where
    W: Driver<
        Object = D::Object,
        IcData = D::IcData,
        Immediate = D::Immediate,
        Command = D::Command,
        Deferred = D::Deferred,
    >
{
}

/// A driver a [`FaultDriver`] (or any wrapper with the same associated types) can wrap: its
/// two hooks whose arguments are typed by the driver the engine runs, written generically
/// over that driver `W`. The driver's own [`Driver::execute`] and
/// [`Driver::execute_command_list`] call these with `W = Self`, so both paths behave alike.
pub trait Wrappable: Driver {
    /// [`Driver::execute`] for the engine running driver `W`.
    fn execute_for<W: SameTypes<Self>>(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, W>,
        op: Op<'_, W>,
    ) -> Result<()>;

    /// [`Driver::execute_command_list`] for the engine running driver `W`. The default does
    /// what the default of [`Driver::execute_command_list`] does (nothing); a driver that
    /// implements that hook implements this one too.
    fn execute_command_list_for<W: SameTypes<Self>>(
        &self,
        imm: &mut Self::Immediate,
        list: &[u8],
        objects: &Resolver<'_, W>,
    ) -> Result<()> {
        let _ = (imm, list, objects);
        Ok(())
    }

    /// [`Driver::record_deferred`] for the engine running driver `W`. The default does what
    /// the default of [`Driver::record_deferred`] does (nothing).
    fn record_deferred_for<W: SameTypes<Self>>(
        &self,
        dc: &mut Self::Deferred,
        call: DeferredCall<'_, W>,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<()> {
        let _ = (dc, call, locals);
        Ok(())
    }

    /// [`Driver::map_discard_deferred`] for the engine running driver `W`. The default does
    /// what the default of [`Driver::map_discard_deferred`] does.
    fn map_discard_deferred_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        let _ = (dc, resource, len, locals);
        Err(Error::Unsupported)
    }

    /// [`Driver::map_no_overwrite_deferred`] for the engine running driver `W`. The default
    /// does what the default of [`Driver::map_no_overwrite_deferred`] does.
    fn map_no_overwrite_deferred_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        let _ = (dc, resource, len, locals);
        Err(Error::Unsupported)
    }

    /// [`Driver::blt`] for the engine running driver `W`. The default does what the default
    /// of [`Driver::blt`] does.
    fn blt_for<W: SameTypes<Self>>(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, W>,
        src: ObjectView<'_, W>,
        dst: ObjectView<'_, W>,
        plan: &BltPlan,
    ) -> Result<()> {
        let _ = (imm, objects, src, dst, plan);
        Err(Error::Unsupported)
    }

    /// [`Driver::refresh_view`] for the engine running driver `W`. The default does what
    /// the default of [`Driver::refresh_view`] does (nothing).
    fn refresh_view_for<W: SameTypes<Self>>(
        &self,
        imm: &mut Self::Immediate,
        view: ObjectView<'_, W>,
        ic: &mut Self::IcData,
        resource: ObjectView<'_, W>,
    ) -> Result<()> {
        let _ = (imm, view, ic, resource);
        Ok(())
    }

    /// [`Driver::renamed`] for the engine running driver `W`. The default does what the
    /// default of [`Driver::renamed`] does (nothing).
    fn renamed_for<W: SameTypes<Self>>(
        &self,
        imm: &mut Self::Immediate,
        resource: ObjectView<'_, W>,
        ic: &mut Self::IcData,
        previous: AllocationHandle,
    ) {
        let _ = (imm, resource, ic, previous);
    }
}

/// A [`Driver`] that delegates every hook to `D` (its default-bodied hooks included, so `D`'s
/// behaviour is kept) and injects its [`FaultPlan`]'s fault at the target call.
#[derive(Debug)]
pub struct FaultDriver<D> {
    inner: D,
    plan: Arc<FaultPlan>,
}

impl<D> FaultDriver<D> {
    /// Wraps `inner`, counting on `plan`.
    pub fn new(inner: D, plan: Arc<FaultPlan>) -> Self {
        FaultDriver { inner, plan }
    }

    /// The wrapped driver.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The plan.
    pub fn plan(&self) -> &Arc<FaultPlan> {
        &self.plan
    }
}

impl<D: Wrappable> Driver for FaultDriver<D> {
    type Object = D::Object;
    type IcData = D::IcData;
    type Immediate = D::Immediate;
    type Command = D::Command;
    type Deferred = D::Deferred;

    fn threading_caps(&self) -> ThreadingCaps {
        if self.plan.device_creation {
            self.plan.tick_infallible("threading_caps");
        }
        self.inner.threading_caps()
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        if self.plan.device_creation {
            self.plan
                .tick_infallible("check_deferred_context_handle_sizes");
        }
        self.inner.check_deferred_context_handle_sizes(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        self.plan.tick_infallible("calc_private_size");
        self.inner.calc_private_size(desc)
    }

    fn calc_deferred_context_handle_size(
        &self,
        ty: HandleType,
        object: Option<&Self::Object>,
    ) -> usize {
        self.plan
            .tick_infallible("calc_deferred_context_handle_size");
        self.inner.calc_deferred_context_handle_size(ty, object)
    }

    fn calc_private_command_list_size(&self) -> usize {
        self.plan.tick_infallible("calc_private_command_list_size");
        self.inner.calc_private_command_list_size()
    }

    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        memory: Option<AllocationHandle>,
        dependency: Option<&Self::Object>,
    ) -> Result<(Self::Object, Self::IcData)> {
        self.plan.tick("create_object", true)?;
        self.inner.create_object(desc, memory, dependency)
    }

    fn destroy_object(&self, ty: HandleType, object: &Self::Object, ic: &mut Self::IcData) {
        self.inner.destroy_object(ty, object, ic);
        self.plan.tick_infallible("destroy_object");
    }

    fn create_immediate(&self) -> Result<Self::Immediate> {
        self.plan.tick("create_immediate", true)?;
        self.inner.create_immediate()
    }

    fn execute(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        self.plan.tick("execute", true)?;
        self.inner.execute_for(imm, objects, op)
    }

    fn flush(&self, imm: &mut Self::Immediate) {
        self.plan.tick_infallible("flush");
        self.inner.flush(imm);
    }

    fn execute_command_list(
        &self,
        imm: &mut Self::Immediate,
        list: &[u8],
        objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        self.plan.tick("execute_command_list", true)?;
        self.inner.execute_command_list_for(imm, list, objects)
    }

    fn builds_command_lists(&self) -> bool {
        self.inner.builds_command_lists()
    }

    fn record_deferred(
        &self,
        dc: &mut Self::Deferred,
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        self.plan.tick("record_deferred", true)?;
        self.inner.record_deferred_for(dc, call, locals)
    }

    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        let short = self.plan.tick_sized("map_discard_deferred", true, true)?;
        let bytes = self
            .inner
            .map_discard_deferred_for(dc, resource, len, locals)?;
        match short {
            true => {
                let end = len.min(bytes.len()).saturating_sub(1);
                Ok(&mut bytes[..end])
            }
            false => Ok(bytes),
        }
    }

    fn map_no_overwrite_deferred<'a>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        let short = self
            .plan
            .tick_sized("map_no_overwrite_deferred", true, true)?;
        let bytes = self
            .inner
            .map_no_overwrite_deferred_for(dc, resource, len, locals)?;
        match short {
            true => {
                let end = len.min(bytes.len()).saturating_sub(1);
                Ok(&mut bytes[..end])
            }
            false => Ok(bytes),
        }
    }

    fn map_caps(&self) -> crate::caps::MapCaps {
        self.inner.map_caps()
    }

    fn execute_command_list_deferred(
        &self,
        dc: &mut Self::Deferred,
        list: &[u8],
        state: StateView<'_>,
    ) -> Result<()> {
        self.plan.tick("execute_command_list_deferred", true)?;
        self.inner.execute_command_list_deferred(dc, list, state)
    }

    fn create_deferred_context(&self, id: DeferredId) -> Result<Self::Deferred> {
        self.plan.tick("create_deferred_context", true)?;
        self.inner.create_deferred_context(id)
    }

    fn destroy_deferred_context(&self, dc: Self::Deferred) {
        self.inner.destroy_deferred_context(dc);
        self.plan.tick_infallible("destroy_deferred_context");
    }

    fn abandon_unbind(&self, dc: &mut Self::Deferred, point: BindPoint, state: StateView<'_>) {
        self.plan.tick_infallible("abandon_unbind");
        self.inner.abandon_unbind(dc, point, state);
    }

    fn open_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> Result<()> {
        self.plan.tick("open_local", true)?;
        self.inner.open_local(dc, ty, object, dependency, local)
    }

    fn use_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        local: &mut [u8],
    ) {
        self.plan.tick_infallible("use_local");
        self.inner.use_local(dc, ty, object, local);
    }

    fn close_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        local: &mut [u8],
        state: StateView<'_>,
    ) {
        self.inner.close_local(dc, ty, object, local, state);
        self.plan.tick_infallible("close_local");
    }

    fn create_command_list(
        &self,
        dc: &mut Self::Deferred,
        private: &mut [u8],
        state: StateView<'_>,
    ) -> Result<()> {
        self.plan.tick("create_command_list", true)?;
        self.inner.create_command_list(dc, private, state)
    }

    fn destroy_command_list(&self, list: ListMemory<'_>) {
        self.inner.destroy_command_list(list);
        self.plan.tick_infallible("destroy_command_list");
    }

    fn abandon_command_list(&self, dc: &mut Self::Deferred) {
        self.plan.tick_infallible("abandon_command_list");
        self.inner.abandon_command_list(dc);
    }

    fn recycle_command_list(&self, dc: &mut Self::Deferred, list: ListMemory<'_>) {
        self.inner.recycle_command_list(dc, list);
        self.plan.tick_infallible("recycle_command_list");
    }

    fn recycle_create_command_list(
        &self,
        dc: &mut Self::Deferred,
        list: ListMemory<'_>,
        state: StateView<'_>,
    ) -> Result<()> {
        self.plan.tick("recycle_create_command_list", true)?;
        self.inner.recycle_create_command_list(dc, list, state)
    }

    fn recycle_destroy_command_list(&self, list: ListMemory<'_>) {
        self.inner.recycle_destroy_command_list(list);
        self.plan.tick_infallible("recycle_destroy_command_list");
    }

    fn recycle_create_deferred_context(&self, dc: &mut Self::Deferred) -> Result<()> {
        self.plan.tick("recycle_create_deferred_context", true)?;
        self.inner.recycle_create_deferred_context(dc)
    }

    fn gamma_caps(&self) -> Result<GammaCaps> {
        self.plan.tick("gamma_caps", true)?;
        self.inner.gamma_caps()
    }

    fn blt_caps(&self) -> BltCaps {
        self.plan.tick_infallible("blt_caps");
        self.inner.blt_caps()
    }

    fn blt(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, Self>,
        src: ObjectView<'_, Self>,
        dst: ObjectView<'_, Self>,
        plan: &BltPlan,
    ) -> Result<()> {
        self.plan.tick("blt", true)?;
        self.inner.blt_for(imm, objects, src, dst, plan)
    }

    fn rotate_identities(&self, imm: &mut Self::Immediate, ic: &mut [&mut Self::IcData]) {
        self.plan.tick_infallible("rotate_identities");
        self.inner.rotate_identities(imm, ic);
    }

    fn refresh_view(
        &self,
        imm: &mut Self::Immediate,
        view: ObjectView<'_, Self>,
        ic: &mut Self::IcData,
        resource: ObjectView<'_, Self>,
    ) -> Result<()> {
        self.plan.tick("refresh_view", true)?;
        self.inner.refresh_view_for(imm, view, ic, resource)
    }

    fn renamed(
        &self,
        imm: &mut Self::Immediate,
        resource: ObjectView<'_, Self>,
        ic: &mut Self::IcData,
        previous: AllocationHandle,
    ) {
        self.plan.tick_infallible("renamed");
        self.inner.renamed_for(imm, resource, ic, previous);
    }
}

/// A [`Kernel`] that delegates every service to `K` and injects its [`FaultPlan`]'s fault at
/// the target call.
#[derive(Debug)]
pub struct FaultKernel<K> {
    inner: K,
    plan: Arc<FaultPlan>,
}

impl<K> FaultKernel<K> {
    /// Wraps `inner`, counting on `plan`.
    pub fn new(inner: K, plan: Arc<FaultPlan>) -> Self {
        FaultKernel { inner, plan }
    }

    /// The wrapped kernel.
    pub fn inner(&self) -> &K {
        &self.inner
    }

    /// The plan.
    pub fn plan(&self) -> &Arc<FaultPlan> {
        &self.plan
    }
}

impl<K: Kernel> Kernel for FaultKernel<K> {
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle> {
        self.plan.tick("allocate", true)?;
        self.inner.allocate(desc)
    }

    fn deallocate(&self, allocation: AllocationHandle) {
        self.inner.deallocate(allocation);
        self.plan.tick_infallible("deallocate");
    }

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        self.plan.tick("submit", true)?;
        self.inner.submit(submission)
    }

    fn completed_fence(&self) -> u64 {
        self.plan.tick_infallible("completed_fence");
        self.inner.completed_fence()
    }

    fn wait_for_fence(&self, fence: u64) -> Result<()> {
        self.plan.tick("wait_for_fence", true)?;
        self.inner.wait_for_fence(fence)
    }

    fn lock(
        &self,
        allocation: AllocationHandle,
        flags: crate::mapping::LockFlags,
    ) -> Result<crate::mapping::CpuMapping> {
        self.plan.tick("lock", true)?;
        self.inner.lock(allocation, flags)
    }

    fn unlock(&self, allocation: AllocationHandle, mapping: crate::mapping::CpuMapping) {
        self.inner.unlock(allocation, mapping);
        self.plan.tick_infallible("unlock");
    }

    fn set_error(&self, context: ContextId, error: Error) {
        self.plan.tick_infallible("set_error");
        self.inner.set_error(context, error);
    }

    fn perform_amortized_processing(&self, context: ContextId) {
        self.plan.tick_infallible("perform_amortized_processing");
        self.inner.perform_amortized_processing(context);
    }

    fn present(&self, call: &PresentCallback) -> Result<PresentStatus> {
        self.plan.tick("present", true)?;
        self.inner.present(call)
    }

    fn set_display_mode(&self, call: &DisplayModeCallback) -> Result<DisplayModeOutcome> {
        self.plan.tick("set_display_mode", true)?;
        self.inner.set_display_mode(call)
    }

    fn set_priority(&self, allocations: &[AllocationHandle], priority: u32) -> Result<()> {
        self.plan.tick("set_priority", true)?;
        self.inner.set_priority(allocations, priority)
    }

    fn query_residency(
        &self,
        allocations: &[AllocationHandle],
        out: &mut [ResidencyStatus],
    ) -> Result<()> {
        self.plan.tick("query_residency", true)?;
        self.inner.query_residency(allocations, out)
    }
}

/// The soft driver under fault injection.
pub type FaultSoftDriver = FaultDriver<SoftDriver>;
/// The soft kernel under fault injection.
pub type FaultSoftKernel = FaultKernel<SoftKernel>;
/// A device over the soft driver and kernel under fault injection.
pub type FaultSoftDevice = crate::Device<FaultSoftDriver, FaultSoftKernel>;
/// Its immediate context.
pub type FaultSoftImmediate = crate::ImmediateContext<FaultSoftDriver, FaultSoftKernel>;
/// One of its deferred contexts.
pub type FaultSoftDeferredContext = crate::DeferredContext<FaultSoftDriver, FaultSoftKernel>;
/// One of its command lists.
pub type FaultSoftCommandList = crate::CommandList<FaultSoftDriver, FaultSoftKernel>;

/// A soft driver and kernel sharing one fresh world, both counting on `plan` (as
/// [`crate::soft::new`]). The world is returned apart from the device so that a scenario can
/// check it even when [`crate::Device::new`] fails or panics at an injected fault.
pub fn new(
    plan: &Arc<FaultPlan>,
    config: SoftConfig,
) -> (FaultSoftDriver, FaultSoftKernel, Arc<SoftWorld>) {
    let (driver, kernel, world) = super::new(config);
    (
        FaultDriver::new(driver, Arc::clone(plan)),
        FaultKernel::new(kernel, Arc::clone(plan)),
        world,
    )
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::*;
    use crate::desc::ResourceDesc;

    fn desc() -> ObjectDesc<'static> {
        ObjectDesc::Resource(ResourceDesc {
            byte_size: 16,
            ..Default::default()
        })
    }

    #[test]
    fn counting_plan_counts_and_logs_every_call_in_order() {
        let plan = Arc::new(FaultPlan::counting().with_log());
        let (driver, kernel, _world) = new(&plan, SoftConfig::from_env().unwrap());
        let d = desc();
        let size = driver.calc_private_size(&d);
        let memory = kernel.allocate(&AllocationDesc {
            size: size as u64,
            shared: false,
            primary: false,
        });
        let (object, mut ic) = driver.create_object(&d, memory.ok(), None).unwrap();
        driver.destroy_object(HandleType::Resource, &object, &mut ic);
        assert_eq!(plan.calls(), 4);
        assert_eq!(
            plan.log(),
            [
                "calc_private_size",
                "allocate",
                "create_object",
                "destroy_object"
            ]
        );
        assert_eq!(plan.hit(), None);
        // Device creation's queries are not counted unless asked.
        let _ = driver.threading_caps();
        assert_eq!(plan.calls(), 4);
    }

    #[test]
    fn r_e1_error_fault_fails_a_fallible_hook_before_it_runs() {
        let plan = Arc::new(FaultPlan::at(0, Fault::Error(Error::OutOfMemory)));
        let (driver, _kernel, world) = new(&plan, SoftConfig::from_env().unwrap());
        assert_eq!(
            driver.create_object(&desc(), None, None).err(),
            Some(Error::OutOfMemory)
        );
        assert!(
            world.live_objects().is_empty(),
            "the inner create never ran"
        );
        let hit = plan.hit().unwrap();
        assert_eq!(
            (hit.call, hit.hook, hit.injected),
            (0, "create_object", true)
        );
    }

    #[test]
    fn error_fault_at_an_infallible_hook_injects_nothing() {
        let plan = Arc::new(FaultPlan::at(0, Fault::Error(Error::OutOfMemory)));
        let (driver, _kernel, _world) = new(&plan, SoftConfig::from_env().unwrap());
        assert_eq!(driver.calc_private_size(&desc()), 16);
        assert!(!plan.injected());
        assert_eq!(plan.hit().map(|h| h.hook), Some("calc_private_size"));
    }

    #[test]
    fn wrong_length_fault_at_another_hook_injects_nothing() {
        let plan = Arc::new(FaultPlan::at(0, Fault::WrongLength));
        let (driver, _kernel, world) = new(&plan, SoftConfig::from_env().unwrap());
        let (object, mut ic) = driver.create_object(&desc(), None, None).unwrap();
        assert_eq!(world.live_objects(), [object.id], "created as usual");
        assert!(!plan.injected());
        assert_eq!(plan.hit().map(|h| h.hook), Some("create_object"));
        driver.destroy_object(HandleType::Resource, &object, &mut ic);
    }

    #[test]
    fn r_d1_a_releasing_hook_releases_then_panics() {
        silence_injected_panics();
        let plan = Arc::new(FaultPlan::at(1, Fault::Panic));
        let (driver, _kernel, world) = new(&plan, SoftConfig::from_env().unwrap());
        let (object, mut ic) = driver.create_object(&desc(), None, None).unwrap();
        assert_eq!(world.live_objects(), [object.id]);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            driver.destroy_object(HandleType::Resource, &object, &mut ic)
        }))
        .unwrap_err();
        let injected = InjectedPanic::of(&*caught).copied();
        assert_eq!(
            injected,
            Some(InjectedPanic {
                call: 1,
                hook: "destroy_object"
            })
        );
        assert!(
            world.live_objects().is_empty(),
            "destroyed before the panic"
        );
        assert!(plan.injected());
    }
}
