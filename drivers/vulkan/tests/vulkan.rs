//! The Vulkan driver against the soft reference driver: the same command streams, in every
//! list mode, leave the same bytes; the validation layer stays silent; the hooks run on the
//! threads the protocol names; one `vkCmdExecuteCommands` per executed driver-built list;
//! the timeline semaphore holds memory a pending buffer references (R-D1, R-D4).
//!
//! Without a Vulkan device each test prints why it was skipped, unless
//! `CMDLIST_VULKAN_REQUIRED=1`, where it fails.

use std::any::Any;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{Scope, ThreadId};

use cmdlist::handle::Resource;
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDevice, SoftImmediate};
use cmdlist::{
    BindClass, BindPoint, Clock, CommandList, DeferredContext, DeferredId, Device, DeviceConfig,
    Driver, Handle, HandleType, ImmediateContext, Kernel, ListMode, ResourceDesc, Stage, Usage,
    ViewDesc,
};
use cmdlist_vulkan::{Faults, VulkanConfig, VulkanDevice, VulkanImmediateContext, VulkanWorld};

mod turn;

// ---------------------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------------------

/// A Vulkan device in `mode`, or `None` (printed) where none exists and none is required.
fn vulkan(
    mode: ListMode,
    device_config: DeviceConfig,
) -> Option<(VulkanDevice, VulkanImmediateContext, Arc<VulkanWorld>)> {
    match cmdlist_vulkan::device(VulkanConfig::for_mode(mode), device_config) {
        Ok((device, ic, world)) => {
            if required() {
                assert!(
                    world.validation_enabled(),
                    "CMDLIST_VULKAN_REQUIRED=1 but VK_LAYER_KHRONOS_validation is not \
                     installed (apt-get install vulkan-validationlayers)"
                );
            }
            Some((device, ic, world))
        }
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn required() -> bool {
    std::env::var("CMDLIST_VULKAN_REQUIRED").is_ok_and(|v| v == "1")
}

/// After device destruction: no violation, no validation message, no allocation left; then
/// the world, the last reference to it, dropped without leaving an object behind.
fn assert_clean(world: Arc<VulkanWorld>) {
    assert_eq!(world.violations(), vec![], "violations");
    assert_eq!(
        world.validation_messages(),
        Vec::<String>::new(),
        "validation layer"
    );
    assert_eq!(world.errors(), vec![], "errors reported (R-E2)");
    assert_eq!(world.live_allocations(), 0, "allocations left (R-D3)");
    assert_eq!(world.zombie_allocations(), 0, "memory waiting for the GPU");
    assert_nothing_left(world);
}

/// Drops the world, which must be the last reference to it (nothing of the device's, a
/// deferred context's pool or a parked list, still holds it), and checks what the
/// validation layer reported as the device and the instance were destroyed: no object left
/// that the driver never destroyed (a command pool, an upload buffer, its memory).
fn assert_nothing_left(world: Arc<VulkanWorld>) {
    let log = world.validation_log();
    let world = Arc::into_inner(world).expect("the world outlived its device's last user");
    drop(world);
    assert_eq!(
        log.messages(),
        Vec::<String>::new(),
        "validation layer as the world dropped"
    );
}

fn buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        ..Default::default()
    }
}

fn dynamic_buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        usage: Usage::Dynamic,
        ..buffer(bytes)
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);

fn srv0() -> BindPoint {
    BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0)
}

type Job<D, K> = Box<dyn FnOnce(&mut DeferredContext<D, K>) -> Box<dyn Any + Send> + Send>;

/// A deferred context that lives on a thread of its own, created there, and runs what it is
/// sent.
struct Worker<D: Driver, K: Kernel> {
    jobs: Option<mpsc::Sender<Job<D, K>>>,
    results: mpsc::Receiver<Box<dyn Any + Send>>,
    id: DeferredId,
    thread: ThreadId,
}

impl<D: Driver, K: Kernel> Worker<D, K> {
    fn spawn<'s, 'e: 's>(scope: &'s Scope<'s, 'e>, device: &'e Device<D, K>) -> Self {
        let (jobs, job_rx) = mpsc::channel::<Job<D, K>>();
        let (result_tx, results) = mpsc::channel::<Box<dyn Any + Send>>();
        scope.spawn(move || {
            let mut dc = device
                .create_deferred_context()
                .expect("a deferred context");
            let hello: Box<dyn Any + Send> = Box::new((dc.id(), std::thread::current().id()));
            result_tx.send(hello).unwrap();
            for job in job_rx {
                result_tx.send(job(&mut dc)).unwrap();
            }
        });
        let hello = results.recv().expect("the worker started");
        let (id, thread) = *hello.downcast::<(DeferredId, ThreadId)>().unwrap();
        Worker {
            jobs: Some(jobs),
            results,
            id,
            thread,
        }
    }

    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut DeferredContext<D, K>) -> T + Send + 'static,
    ) -> T {
        self.send(f);
        self.recv()
    }

    /// Starts `f` on the worker's thread; [`Worker::recv`] gets its result.
    fn send<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut DeferredContext<D, K>) -> T + Send + 'static,
    ) {
        let job: Job<D, K> = Box::new(move |dc| Box::new(f(dc)));
        self.jobs.as_ref().unwrap().send(job).unwrap();
    }

    fn recv<T: Send + 'static>(&self) -> T {
        *self.results.recv().unwrap().downcast::<T>().unwrap()
    }
}

impl<D: Driver, K: Kernel> Drop for Worker<D, K> {
    fn drop(&mut self) {
        self.jobs.take(); // the thread drops its context and ends
    }
}

// ---------------------------------------------------------------------------------------
// The stream both drivers run
// ---------------------------------------------------------------------------------------

/// What a stream leaves: the resources still alive, with their sizes, and the workers'
/// contexts and threads.
struct Outcome {
    alive: Vec<(Handle<Resource>, u64)>,
    contexts: Vec<(DeferredId, ThreadId)>,
    list_executes: u64,
}

/// Four deferred contexts on their own threads; lists executed again, a nested list, a
/// Map(DISCARD), binds and FillBound, IC data read at execute, flushes, destroys; then a
/// second round that reuses the contexts (and recycled list memory).
fn stream<D, K>(device: &Device<D, K>, ic: &mut ImmediateContext<D, K>) -> Outcome
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let sizes = [37u64, 64, 100, 1000, 4099, 256];
    let r: Vec<Handle<Resource>> = sizes
        .iter()
        .map(|&n| device.create_resource(buffer(n)).unwrap())
        .collect();
    let d = device.create_resource(dynamic_buffer(96)).unwrap();
    let v1 = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: r[3],
                first_byte: 3,
                byte_len: 50,
            },
        )
        .unwrap();
    let v2 = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: r[4],
                first_byte: 101,
                byte_len: 333,
            },
        )
        .unwrap();
    ic.update(r[0], 0, &pattern(37, 1)).unwrap();
    ic.command(&SoftCommand::Fill {
        dst: r[1],
        value: 0x11,
    })
    .unwrap();
    ic.update(r[4], 5, &pattern(2000, 7)).unwrap();
    *ic.ic_data_mut(r[5]).unwrap() = 0x42;
    let mut list_executes = 0;

    let contexts = std::thread::scope(|scope| {
        let workers: Vec<Worker<D, K>> = (0..4).map(|_| Worker::spawn(scope, device)).collect();
        let (r0, r1, r2, r3, r4, r5) = (r[0], r[1], r[2], r[3], r[4], r[5]);
        // A: a region copy, a view cleared, an update, a bound view filled, a Map(DISCARD),
        // the IC data of r5 read when it runs.
        let a = workers[0].run(move |dc| {
            dc.command(SoftCommand::CopyRegion {
                dst: r3,
                dst_offset: 10,
                src: r0,
                src_offset: 2,
                len: 30,
            })
            .unwrap();
            dc.command(SoftCommand::ClearView {
                view: v1,
                value: 0xA1,
            })
            .unwrap();
            dc.update(r2, 7, &pattern(50, 3)).unwrap();
            dc.bind(RT0, Some(v2.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0xB2,
            })
            .unwrap();
            dc.map_discard(d).unwrap().copy_from_slice(&pattern(96, 9));
            dc.unmap(d).unwrap();
            dc.command(SoftCommand::FillIcByte { dst: r5 }).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // B: writes r2 too (right after A), a bound resource filled, an overlapping copy
        // inside one buffer.
        let b = workers[1].run(move |dc| {
            dc.command(SoftCommand::Fill {
                dst: r2,
                value: 0x33,
            })
            .unwrap();
            dc.bind(srv0(), Some(r1.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: srv0(),
                value: 0xC3,
            })
            .unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: r1,
                dst_offset: 1,
                src: r0,
                src_offset: 0,
                len: 20,
            })
            .unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: r4,
                dst_offset: 10,
                src: r4,
                src_offset: 0,
                len: 100,
            })
            .unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // C: reads r4, which the immediate context writes just before executing it.
        let c = workers[2].run(move |dc| {
            dc.command(SoftCommand::Copy { dst: r5, src: r4 }).unwrap();
            dc.command(SoftCommand::Fill {
                dst: r0,
                value: 0x5C,
            })
            .unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // N: executes A inside (nested), then binds and fills after it.
        let a_for_n = Arc::clone(&a);
        let n = workers[3].run(move |dc| {
            dc.update(r0, 0, &[0xEE; 5]).unwrap();
            dc.bind(RT0, Some(v1.any())).unwrap();
            dc.execute_command_list(&a_for_n).unwrap();
            // Nothing bound after an execute (R-C3): fills nothing.
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0xF0,
            })
            .unwrap();
            dc.bind(RT0, Some(v1.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0xD4,
            })
            .unwrap();
            dc.command(SoftCommand::Fill {
                dst: d,
                value: 0x5A,
            })
            .unwrap();
            dc.map_discard(d).unwrap()[..7].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
            dc.unmap(d).unwrap();
            drop(a_for_n);
            Arc::new(dc.finish().unwrap())
        });

        let run = |ic: &mut ImmediateContext<D, K>, list: &CommandList<D, K>, n: &mut u64| {
            ic.execute_command_list(list).unwrap();
            *n += 1;
        };
        // A list reading what the immediate context wrote just before.
        ic.update(r[4], 0, &pattern(300, 11)).unwrap();
        run(ic, &c, &mut list_executes);
        // Two lists writing the same buffer back to back.
        run(ic, &a, &mut list_executes);
        run(ic, &b, &mut list_executes);
        // A list executed twice in one submission, its IC data changed in between.
        *ic.ic_data_mut(r[5]).unwrap() = 0x43;
        run(ic, &a, &mut list_executes);
        ic.bind(RT0, Some(v1.any())).unwrap();
        ic.command(&SoftCommand::FillBound {
            point: RT0,
            value: 0x99,
        })
        .unwrap();
        // A view the application destroyed while it is bound: the binding keeps it, and a
        // draw still writes through it (R-D4).
        let v3 = device
            .create_view(
                HandleType::RenderTargetView,
                ViewDesc {
                    resource: r[0],
                    first_byte: 5,
                    byte_len: 20,
                },
            )
            .unwrap();
        ic.bind(RT0, Some(v3.any())).unwrap();
        device.destroy(v3).unwrap();
        ic.command(&SoftCommand::FillBound {
            point: RT0,
            value: 0x3C,
        })
        .unwrap();
        ic.bind(RT0, None).unwrap();
        ic.flush().unwrap();
        run(ic, &n, &mut list_executes);
        *ic.ic_data_mut(r[5]).unwrap() = 0x44;
        run(ic, &a, &mut list_executes);
        // The lists still hold r2 and v2: destroyed objects the next executes use.
        device.destroy(v2).unwrap();
        device.destroy(r[2]).unwrap();
        run(ic, &b, &mut list_executes);
        ic.flush().unwrap();
        drop((a, b, c, n));
        ic.flush().unwrap();

        // Round two: the same contexts record again (their old lists recycled where the
        // list clock allows).
        let e = workers[0].run(move |dc| {
            dc.command(SoftCommand::Fill {
                dst: r3,
                value: 0x77,
            })
            .unwrap();
            dc.update(r3, 999, &[0x12]).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        let f = workers[1].run(move |dc| {
            dc.command(SoftCommand::CopyRegion {
                dst: r1,
                dst_offset: 60,
                src: r3,
                src_offset: 998,
                len: 2,
            })
            .unwrap();
            dc.abandon().unwrap();
            dc.command(SoftCommand::Copy { dst: r1, src: r5 }).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        run(ic, &e, &mut list_executes);
        run(ic, &f, &mut list_executes);
        ic.flush().unwrap();
        drop((e, f));
        ic.flush().unwrap();
        workers.iter().map(|w| (w.id, w.thread)).collect::<Vec<_>>()
    });
    ic.flush().unwrap();
    let alive = vec![
        (r[0], sizes[0]),
        (r[1], sizes[1]),
        (r[3], sizes[3]),
        (r[4], sizes[4]),
        (r[5], sizes[5]),
        (d, 96),
    ];
    Outcome {
        alive,
        contexts,
        list_executes,
    }
}

fn compare(mode: ListMode) {
    let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
        return;
    };
    assert_eq!(device.list_mode(), mode);
    let out = stream(&device, &mut ic);
    world.wait_gpu().unwrap();
    let bytes: Vec<Vec<u8>> = out
        .alive
        .iter()
        .map(|&(h, size)| {
            let a = device.object(h).unwrap().allocation().unwrap();
            world.read(a, size as usize).unwrap()
        })
        .collect();
    let expected = soft_bytes(mode, |d, ic| stream(d, ic).alive);
    for (i, (got, want)) in bytes.iter().zip(&expected).enumerate() {
        assert_eq!(got.len(), want.len(), "resource {i}'s size");
        if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
            panic!(
                "{mode:?}: resource {i} differs first at byte {at}: vulkan {:?}, soft {:?}",
                &got[at..(at + 16).min(got.len())],
                &want[at..(at + 16).min(want.len())]
            );
        }
    }
    // One vkCmdExecuteCommands per executed driver-built list, whatever its length (the
    // nested list's included: its segments go in one call).
    let expected_executes = match mode {
        ListMode::DriverBuilt => out.list_executes,
        _ => 0,
    };
    assert_eq!(world.execute_commands(), expected_executes);
    ic.destroy_device().unwrap();
    // Each context's pool was made and used on the context's own thread only.
    for (id, thread) in out.contexts {
        let (created, threads) = world.pool_threads(id);
        if mode == ListMode::DriverBuilt {
            assert_eq!(created, Some(thread), "context {id}'s pool made elsewhere");
            assert_eq!(threads, vec![thread], "context {id}'s pool used elsewhere");
        } else {
            assert_eq!(
                (created, threads),
                (None, vec![]),
                "no pools without built lists"
            );
        }
    }
    drop((device, ic));
    assert_clean(world);
}

#[test]
fn same_bytes_as_soft_emulated() {
    let _turn = turn::take();
    compare(ListMode::Emulated);
}

#[test]
fn same_bytes_as_soft_replayed() {
    let _turn = turn::take();
    compare(ListMode::Replayed);
}

#[test]
fn same_bytes_as_soft_driver_built() {
    let _turn = turn::take();
    compare(ListMode::DriverBuilt);
}

// ---------------------------------------------------------------------------------------
// Hazards: the barrier rule, witnessed by the validation layer's synchronisation checks
// ---------------------------------------------------------------------------------------

fn vulkan_with(
    config: VulkanConfig,
    device_config: DeviceConfig,
) -> Option<(VulkanDevice, VulkanImmediateContext, Arc<VulkanWorld>)> {
    match cmdlist_vulkan::device(config, device_config) {
        Ok(parts) => Some(parts),
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Records `commands` on a deferred context of its own thread.
fn list_of(
    device: &VulkanDevice,
    commands: Vec<SoftCommand>,
) -> CommandList<cmdlist_vulkan::VulkanDriver, cmdlist_vulkan::VulkanKernel> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut dc = device.create_deferred_context().unwrap();
            for c in commands {
                dc.command(c).unwrap();
            }
            dc.finish().unwrap()
        })
        .join()
        .unwrap()
    })
}

/// The three hazard cases; returns what the validation layer said.
fn hazards(mode: ListMode, barriers: bool) -> Option<(bool, Vec<String>)> {
    let config = VulkanConfig {
        hazard_barriers: barriers,
        ..VulkanConfig::for_mode(mode)
    };
    let (device, mut ic, world) = vulkan_with(config, DeviceConfig::default())?;
    let r = device.create_resource(buffer(64)).unwrap();
    let s = device.create_resource(buffer(64)).unwrap();
    let t = device.create_resource(buffer(64)).unwrap();
    let alloc = |h: Handle<Resource>| device.object(h).unwrap().allocation().unwrap();
    let (ra, sa, ta) = (alloc(r), alloc(s), alloc(t));
    let reads = list_of(&device, vec![SoftCommand::Copy { dst: s, src: r }]);
    let fill_t = |value| {
        list_of(
            &device,
            vec![
                SoftCommand::Fill { dst: t, value },
                SoftCommand::CopyRegion {
                    dst: t,
                    dst_offset: 0,
                    src: r,
                    src_offset: 0,
                    len: u64::from(value),
                },
            ],
        )
    };
    let (first, second) = (fill_t(3), fill_t(5));
    let twice = list_of(
        &device,
        vec![
            SoftCommand::Copy { dst: s, src: r },
            SoftCommand::Fill {
                dst: r,
                value: 0x7E,
            },
        ],
    );

    // 1. A list reads what the immediate context wrote just before executing it.
    ic.update(r, 0, &pattern(64, 1)).unwrap();
    ic.execute_command_list(&reads).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    if barriers {
        assert_eq!(world.read(sa, 64).unwrap(), pattern(64, 1), "{mode:?}: RAW");
    }
    // 2. Two lists write the same buffer back to back: the second's bytes win.
    ic.execute_command_list(&first).unwrap();
    ic.execute_command_list(&second).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    if barriers {
        let mut want = vec![5u8; 64];
        want[..5].copy_from_slice(&pattern(64, 1)[..5]);
        assert_eq!(world.read(ta, 64).unwrap(), want, "{mode:?}: WAW");
    }
    // 3. A list executed twice in one submission: the second run copies what the first
    //    filled (a read after the first run's write, and a write after its read).
    ic.execute_command_list(&twice).unwrap();
    ic.execute_command_list(&twice).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    if barriers {
        assert_eq!(
            world.read(sa, 64).unwrap(),
            vec![0x7E; 64],
            "{mode:?}: twice"
        );
        assert_eq!(
            world.read(ra, 64).unwrap(),
            vec![0x7E; 64],
            "{mode:?}: twice"
        );
    }
    drop((reads, first, second, twice));
    ic.destroy_device().unwrap();
    assert_eq!(world.violations(), vec![]);
    Some((world.validation_enabled(), world.validation_messages()))
}

#[test]
fn hazards_ordered_in_every_mode() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        if let Some((_, messages)) = hazards(mode, true) {
            assert_eq!(messages, Vec::<String>::new(), "{mode:?}");
        }
    }
}

/// The checks have teeth: without the rule's barriers the synchronisation validation
/// reports the hazards (where the layer is installed).
#[test]
fn hazards_reported_without_the_barriers() {
    let _turn = turn::take();
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let Some((validation, messages)) = hazards(mode, false) else {
            return;
        };
        if !validation {
            eprintln!("skipped: no validation layer to report hazards");
            return;
        }
        let hazards = messages
            .iter()
            .filter(|m| m.contains("SYNC-HAZARD"))
            .count();
        assert!(hazards > 0, "{mode:?}: no hazard reported: {messages:#?}");
    }
}

/// One call of [`ranges_steps`]: an UpdateSubresource or a command.
enum Step {
    Update(Handle<Resource>, u64, Vec<u8>),
    Command(SoftCommand),
}

/// Eight calls on three 64-byte buffers, of which the hazard rule orders three behind a
/// barrier: 1. update r[0..16]; 2. update r[32..48] (disjoint: none); 3. fill s (another
/// buffer: none); 4. copy r[0..16] into t[0..16] (**read after write** on r); 5. copy
/// r[32..48] into t[16..32] (written before the barrier of 4: none); 6. fill r (**write
/// after read**: 4 read r[0..16]); 7. copy t[0..8] into s[0..8] (written before the barrier
/// of 6: none); 8. fill t (**write after read** on t[0..8], which 7 read, and after write).
/// Returns the steps and the bytes they leave in r, s and t (from zeros).
fn ranges_steps([r, s, t]: [Handle<Resource>; 3]) -> (Vec<Step>, [Vec<u8>; 3]) {
    let region = |dst, dst_offset, src, src_offset, len| {
        Step::Command(SoftCommand::CopyRegion {
            dst,
            dst_offset,
            src,
            src_offset,
            len,
        })
    };
    let steps = vec![
        Step::Update(r, 0, pattern(16, 1)),
        Step::Update(r, 32, pattern(16, 2)),
        Step::Command(SoftCommand::Fill {
            dst: s,
            value: 0x5E,
        }),
        region(t, 0, r, 0, 16),
        region(t, 16, r, 32, 16),
        Step::Command(SoftCommand::Fill {
            dst: r,
            value: 0xA7,
        }),
        region(s, 0, t, 0, 8),
        Step::Command(SoftCommand::Fill {
            dst: t,
            value: 0x77,
        }),
    ];
    let (mut rb, mut sb) = (vec![0u8; 64], vec![0x5Eu8; 64]);
    rb[..16].copy_from_slice(&pattern(16, 1));
    rb[32..48].copy_from_slice(&pattern(16, 2));
    let mut tb = vec![0u8; 64];
    tb[..16].copy_from_slice(&rb[..16]);
    tb[16..32].copy_from_slice(&rb[32..48]);
    rb.fill(0xA7);
    sb[..8].copy_from_slice(&tb[..8]);
    tb.fill(0x77);
    (steps, [rb, sb, tb])
}

/// Barriers only where ranges meet: [`ranges_steps`] on the immediate context's primary
/// puts 3 barriers into it, and in a driver-built list 3 plus the one that starts its
/// secondary; the primary that executes the list adds none (the list's start barrier
/// orders it after the primary's commands). The bytes are right and the validation
/// layer's synchronisation checks find no hazard, so the barriers left out were not needed
/// and the three kept are.
#[test]
fn hazard_barriers_only_where_ranges_meet() {
    let _turn = turn::take();
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let made = [0; 3].map(|_| device.create_resource(buffer(64)).unwrap());
        let (steps, want) = ranges_steps(made);
        let before = world.hazard_barriers();
        match mode {
            ListMode::DriverBuilt => {
                let list = std::thread::scope(|scope| {
                    scope
                        .spawn(|| {
                            let mut dc = device.create_deferred_context().unwrap();
                            for step in steps {
                                match step {
                                    Step::Update(h, at, bytes) => dc.update(h, at, &bytes),
                                    Step::Command(c) => dc.command(c),
                                }
                                .unwrap();
                            }
                            dc.finish().unwrap()
                        })
                        .join()
                        .unwrap()
                });
                assert_eq!(world.hazard_barriers() - before, 4, "the list's secondary");
                ic.execute_command_list(&list).unwrap();
                ic.flush().unwrap();
                assert_eq!(world.hazard_barriers() - before, 4, "the primary adds none");
                drop(list);
            }
            _ => {
                for step in steps {
                    match step {
                        Step::Update(h, at, bytes) => ic.update(h, at, &bytes),
                        Step::Command(c) => ic.command(&c),
                    }
                    .unwrap();
                }
                ic.flush().unwrap();
                assert_eq!(world.hazard_barriers() - before, 3, "the primary");
            }
        }
        world.wait_gpu().unwrap();
        for (i, (h, want)) in made.iter().zip(&want).enumerate() {
            let a = device.object(*h).unwrap().allocation().unwrap();
            assert_eq!(&world.read(a, 64).unwrap(), want, "{mode:?}: buffer {i}");
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// Buffers submitted one after another: the second's first command reads what the first's
/// last command wrote, with no wait in between and nothing tracked in the second buffer;
/// the barrier that ends each primary orders it (its second scope reaches the later
/// submissions). The validation layer of this machine (1.3.239) does not check hazards
/// across submissions, so this holds the bytes, not the barrier: with an end barrier that
/// reaches the host alone it passes too.
#[test]
fn submissions_in_a_row_are_ordered_by_the_end_barrier() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::Replayed, DeviceConfig::default()) else {
        return;
    };
    let [r, s] = [0; 2].map(|_| device.create_resource(buffer(64)).unwrap());
    ic.command(&SoftCommand::Fill {
        dst: r,
        value: 0x3C,
    })
    .unwrap();
    ic.flush().unwrap();
    ic.command(&SoftCommand::Copy { dst: s, src: r }).unwrap();
    ic.flush().unwrap();
    ic.command(&SoftCommand::Fill {
        dst: r,
        value: 0x4D,
    })
    .unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let sa = device.object(s).unwrap().allocation().unwrap();
    assert_eq!(world.read(sa, 64).unwrap(), vec![0x3C; 64]);
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// The barrier that starts each secondary: a nested list's segments run in one
/// `vkCmdExecuteCommands`, with no command of the primary between them, so only a barrier
/// inside the secondaries orders one segment after another. Here the outer list fills x in
/// its own segment, then chains an inner list (copy x into y) twice (the same secondary
/// twice in one call: its second run writes y after the first), then copies y into z in a
/// segment of its own. Without the start barrier the validation layer reports a hazard
/// between the segments (`SYNC-HAZARD-READ-AFTER-WRITE` in `vkCmdExecuteCommands`), even
/// with barriers before and after the `vkCmdExecuteCommands` in the primary.
#[test]
fn nested_segments_are_ordered_by_their_start_barrier() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let [x, y, z] = [0; 3].map(|_| device.create_resource(buffer(64)).unwrap());
    let outer = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut dc = device.create_deferred_context().unwrap();
                dc.command(SoftCommand::Copy { dst: y, src: x }).unwrap();
                let inner = dc.finish().unwrap();
                dc.command(SoftCommand::Fill {
                    dst: x,
                    value: 0x21,
                })
                .unwrap();
                dc.execute_command_list(&inner).unwrap();
                dc.execute_command_list(&inner).unwrap();
                dc.command(SoftCommand::Copy { dst: z, src: y }).unwrap();
                dc.finish().unwrap()
            })
            .join()
            .unwrap()
    });
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let za = device.object(z).unwrap().allocation().unwrap();
    assert_eq!(world.read(za, 64).unwrap(), vec![0x21; 64]);
    drop(outer);
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

// ---------------------------------------------------------------------------------------
// The timeline semaphore holds R-D1 and R-D4
// ---------------------------------------------------------------------------------------

/// A destroyed resource's memory stays while a submitted buffer that references it is
/// pending on the GPU (held by a semaphore the test signals), and goes once it completed.
#[test]
fn r_d1_r_d4_pending_buffer_keeps_destroyed_memory() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let r = device.create_resource(buffer(4096)).unwrap();
        let a = device.object(r).unwrap().allocation().unwrap();
        let list = (mode != ListMode::Emulated)
            .then(|| list_of(&device, vec![SoftCommand::Fill { dst: r, value: 9 }]));
        world.hold_gpu();
        ic.update(r, 0, &pattern(4096, 2)).unwrap();
        if let Some(list) = &list {
            ic.execute_command_list(list).unwrap();
        }
        ic.flush().unwrap();
        let pending = world.last_submitted();
        assert!(world.completed() < pending, "{mode:?}: the GPU is held");
        drop(list);
        device.destroy(r).unwrap();
        for _ in 0..3 {
            ic.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(world.completed() < pending, "{mode:?}: still held");
        assert!(
            world.is_allocated(a),
            "{mode:?}: memory freed while a pending buffer references it"
        );
        assert_eq!(world.zombie_allocations(), 0);
        world.release_gpu();
        world.wait_gpu().unwrap();
        ic.flush().unwrap();
        assert!(
            !world.is_allocated(a),
            "{mode:?}: freed once the GPU finished"
        );
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// Under the submitted clock (R-D1 only) the engine deallocates once the buffer is
/// submitted; the kernel keeps the memory until the timeline passes that buffer, as a
/// kernel memory manager does, without a violation.
#[test]
fn r_d1_submitted_clock_memory_waits_for_the_timeline() {
    let _turn = turn::take();
    let config = DeviceConfig::default().with_retire_clock(Clock::Submitted);
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, config) else {
        return;
    };
    let r = device.create_resource(buffer(256)).unwrap();
    let a = device.object(r).unwrap().allocation().unwrap();
    world.hold_gpu();
    ic.update(r, 0, &pattern(256, 4)).unwrap();
    ic.flush().unwrap();
    device.destroy(r).unwrap();
    ic.flush().unwrap();
    assert!(!world.is_allocated(a), "deallocated after the submit");
    assert_eq!(
        world.zombie_allocations(),
        1,
        "its memory waits for the GPU"
    );
    world.release_gpu();
    world.wait_gpu().unwrap();
    assert_eq!(world.zombie_allocations(), 0);
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// The kernel's check is live: a deallocation while a submitted buffer that names the
/// allocation is pending is a violation under the completed clock (R-D4).
#[test]
fn r_d4_kernel_flags_memory_freed_under_a_pending_buffer() {
    let _turn = turn::take();
    let world = match cmdlist_vulkan::new(VulkanConfig::default()) {
        Ok((driver, kernel, world)) => {
            drop(driver);
            let a = kernel
                .allocate(&cmdlist::AllocationDesc {
                    size: 64,
                    shared: false,
                    primary: false,
                })
                .unwrap();
            world.hold_gpu();
            kernel
                .submit(&cmdlist::Submission {
                    fence: 1,
                    allocations: &[a],
                    operations: 1,
                })
                .unwrap();
            assert_eq!(kernel.completed_fence(), 0);
            kernel.deallocate(a);
            let violations = world.violations();
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert_eq!(violations[0].rule, "R-D4");
            assert_eq!(world.zombie_allocations(), 1, "freed only after the GPU");
            world.release_gpu();
            kernel.wait_for_fence(1).unwrap();
            assert_eq!(kernel.completed_fence(), 1);
            assert_eq!(world.zombie_allocations(), 0);
            world
        }
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    assert_eq!(world.validation_messages(), Vec::<String>::new());
}

/// A world dropped while the GPU is held (a test that panicked before releasing it) lets
/// the held buffers run instead of waiting for them forever.
#[test]
fn world_dropped_with_the_gpu_held_does_not_hang() {
    let _turn = turn::take();
    let (driver, kernel, world) = match cmdlist_vulkan::new(VulkanConfig::default()) {
        Ok(parts) => parts,
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    world.hold_gpu();
    kernel
        .submit(&cmdlist::Submission {
            fence: 1,
            allocations: &[],
            operations: 0,
        })
        .unwrap();
    assert_eq!(world.completed(), 0, "held");
    let (done, dropped) = mpsc::channel();
    std::thread::spawn(move || {
        drop((driver, kernel, world));
        done.send(()).unwrap();
    });
    dropped
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the world's drop waited for a held GPU");
}

/// `VulkanWorld::read` waits for the newest submitted buffer that referenced the
/// allocation before it reads the bytes: read at once after the flush, the GPU's copy of
/// 16 MiB still running, they are the bytes written.
#[test]
fn read_waits_for_the_buffer_that_wrote() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::Replayed, DeviceConfig::default()) else {
        return;
    };
    const LEN: usize = 16 << 20;
    let r = device.create_resource(buffer(LEN as u64)).unwrap();
    let a = device.object(r).unwrap().allocation().unwrap();
    let bytes = pattern(LEN, 9);
    ic.update(r, 0, &bytes).unwrap();
    ic.flush().unwrap();
    assert!(world.read(a, LEN).unwrap() == bytes, "read before the copy");
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// The kernel checks the engine against what the GPU commands really reference: memory an
/// unsubmitted buffer uses must not be deallocated (R-D1). The engine never does; the test
/// calls the kernel itself, and the memory still outlives the buffer.
#[test]
fn r_d1_kernel_flags_memory_freed_under_an_unsubmitted_buffer() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::Replayed, DeviceConfig::default()) else {
        return;
    };
    let r = device.create_resource(buffer(16)).unwrap();
    let a = device.object(r).unwrap().allocation().unwrap();
    ic.update(r, 0, &[1; 16]).unwrap();
    device.kernel().deallocate(a); // what the engine must never do
    let rules: Vec<_> = world.violations().iter().map(|v| v.rule).collect();
    assert_eq!(rules, ["R-D1"]);
    assert_eq!(world.zombie_allocations(), 1, "kept for the buffer");
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    assert_eq!(world.zombie_allocations(), 0);
    device.destroy(r).unwrap();
    ic.destroy_device().unwrap(); // the engine's own deallocate: a second one
    let rules: Vec<_> = world.violations().iter().map(|v| v.rule).collect();
    assert_eq!(rules, ["R-D1", "R-D1"]);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// Vulkan faults (Faults): errors, never a panic, a hang or a leak
// ---------------------------------------------------------------------------------------

/// World creation failing at each of its steps in turn (`Faults::creation_step` 1, 2, ...
/// until a world with the validation layer on is made) returns `Unavailable` and leaves
/// nothing made: the validation layer, watching `vkDestroyInstance` through the messenger
/// chained to the instance's creation, reports no object left undestroyed (nor anything
/// else).
#[test]
fn world_creation_failing_at_any_step_leaks_nothing() {
    let _turn = turn::take();
    match VulkanWorld::new(VulkanConfig::default()) {
        Ok(world) if world.validation_enabled() => drop(world),
        Ok(_) if !required() => return eprintln!("skipped: no validation layer"),
        Err(e) if !required() => return eprintln!("skipped: {e}"),
        Ok(_) => panic!("CMDLIST_VULKAN_REQUIRED=1 but no validation layer"),
        Err(e) => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
    }
    let mut failed = Vec::new();
    for step in 1..100 {
        let config = VulkanConfig {
            faults: Faults {
                creation_step: step,
                ..Faults::default()
            },
            ..VulkanConfig::default()
        };
        match VulkanWorld::new(config) {
            Ok(world) if world.validation_enabled() => {
                assert!(
                    world.validation_messages().is_empty(),
                    "step {step}: {:#?}",
                    world.validation_messages()
                );
                eprintln!(
                    "creation failed at each of its {} steps: {failed:#?}",
                    step - 1
                );
                // The instance, the device, the messenger, the pipelines' five objects,
                // two semaphores and the pool: a step each.
                assert!(step > 10, "only {} steps: {failed:#?}", step - 1);
                return;
            }
            // The messenger's step: made without it (the layer's messages off), as when
            // its creation really fails.
            Ok(world) => drop(world),
            Err(e) => {
                assert!(
                    e.reason.contains("host memory allocation has failed"),
                    "step {step}: {}",
                    e.reason
                );
                assert_eq!(
                    e.validation_messages,
                    Vec::<String>::new(),
                    "step {step} ({}): what the layer reported",
                    e.reason
                );
                failed.push(e.reason);
            }
        }
    }
    panic!("creation never succeeded: {failed:#?}");
}

/// A driver-built list executed in a buffer whose submit failed (`Faults::submit`): the
/// engine keeps the buffer open and submits it again, with the same fence, at the next
/// flush; under the submitted list clock it then destroys the list at once, and the driver
/// parks the list's secondaries until the timeline passes the buffer that really carries
/// them. The GPU is held meanwhile: nothing is released, the layer sees no pending command
/// buffer freed, and the list's bytes land once the GPU runs.
#[test]
fn list_parked_on_a_failed_submit_waits_for_the_buffer_that_carries_it() {
    let _turn = turn::take();
    let config = VulkanConfig {
        faults: Faults {
            submit: 1,
            ..Faults::default()
        },
        ..VulkanConfig::for_mode(ListMode::DriverBuilt)
    };
    let device_config = DeviceConfig::default().with_list_clock(Clock::Submitted);
    let Some((device, mut ic, world)) = vulkan_with(config, device_config) else {
        return;
    };
    let [r, s, t] = [0; 3].map(|_| device.create_resource(buffer(256)).unwrap());
    let list = list_of(
        &device,
        vec![
            SoftCommand::Fill { dst: r, value: 5 },
            SoftCommand::Copy { dst: s, src: r },
        ],
    );
    world.hold_gpu();
    ic.execute_command_list(&list).unwrap();
    assert_eq!(
        ic.flush(),
        Err(cmdlist::Error::OutOfMemory),
        "the injected fault"
    );
    assert_eq!(world.faults_injected(), 1);
    assert_eq!(world.last_submitted(), 0, "nothing reached the queue");
    drop(list);
    ic.flush().unwrap();
    let carrying = world.last_submitted();
    assert!(carrying >= 1);
    for round in 0..3u8 {
        ic.command(&SoftCommand::Fill {
            dst: t,
            value: round,
        })
        .unwrap();
        ic.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(world.completed() < carrying, "the GPU is held");
    let stats = world.built_stats();
    assert_eq!(
        stats.handed_back + stats.freed_orphaned + stats.recycled,
        0,
        "the list's secondaries released before the buffer that carries them ran: \
         {stats:?}"
    );
    world.release_gpu();
    world.wait_gpu().unwrap();
    ic.flush().unwrap();
    let stats = world.built_stats();
    assert!(stats.freed_orphaned >= 1, "released once it ran: {stats:?}");
    let sa = device.object(s).unwrap().allocation().unwrap();
    assert_eq!(world.read(sa, 256).unwrap(), vec![5; 256]);
    ic.destroy_device().unwrap();
    assert_eq!(world.violations(), vec![]);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
    assert_eq!(world.live_allocations(), 0);
    assert_eq!(world.zombie_allocations(), 0);
}

/// A clear on the immediate context whose upload memory for its unaligned ends runs out
/// is refused whole or made whole: the fourth `vkAllocateMemory` fails (the two resources'
/// took the first two, the primary's first upload chunk the third), after an update that
/// leaves 1 to 11 bytes of that chunk free, so the clear's ends (a byte each) find room for
/// both, one, or neither. Either the call returns `OutOfMemory` and none of its bytes land,
/// or it succeeds and all do. The engine takes a refused call as never made; the immediate
/// context's primary runs whatever was recorded (a deferred context's list is refused at
/// Finish after such an error).
#[test]
fn a_clear_that_runs_out_of_upload_memory_part_way_writes_nothing() {
    let _turn = turn::take();
    const CHUNK: usize = 64 << 10;
    for free in 1..12 {
        let config = VulkanConfig {
            faults: Faults {
                memory: 4,
                ..Faults::default()
            },
            ..VulkanConfig::for_mode(ListMode::Replayed)
        };
        let Some((device, mut ic, world)) = vulkan_with(config, DeviceConfig::default()) else {
            return;
        };
        let r = device.create_resource(buffer(16)).unwrap();
        let big = device.create_resource(buffer(CHUNK as u64)).unwrap();
        let view = device
            .create_view(
                HandleType::RenderTargetView,
                ViewDesc {
                    resource: r,
                    first_byte: 3,
                    byte_len: 10,
                },
            )
            .unwrap();
        ic.update(big, 0, &pattern(CHUNK - free, 8)).unwrap();
        let clear = ic.command(&SoftCommand::ClearView { view, value: 0xC1 });
        ic.flush().unwrap();
        world.wait_gpu().unwrap();
        let ra = device.object(r).unwrap().allocation().unwrap();
        let mut want = vec![0u8; 16];
        match clear {
            Ok(()) => want[3..13].fill(0xC1),
            Err(e) => assert_eq!(e, cmdlist::Error::OutOfMemory, "{free} bytes free"),
        }
        assert_eq!(
            world.read(ra, 16).unwrap(),
            want,
            "{free} bytes free: the clear {clear:?}"
        );
        ic.destroy_device().unwrap();
        assert_eq!(world.violations(), vec![]);
        assert_eq!(world.validation_messages(), Vec::<String>::new());
        assert_eq!(world.live_allocations(), 0);
    }
}

/// A stream touching every kind of Vulkan call `Faults` can fail: allocations, upload
/// memory, a deferred context's pool, secondaries and primaries, submits, a draw, a list
/// executed and nested. Returns the errors the calls returned (each call's error is a
/// `cmdlist::Error`, by its type; the point is that they return).
fn fault_stream(device: &VulkanDevice, ic: &mut VulkanImmediateContext) -> Vec<cmdlist::Error> {
    let mut errors = Vec::new();
    let mut note = |r: cmdlist::Result<()>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    let made: Result<Vec<_>, _> = [16u64, 64, 256, 100_000]
        .into_iter()
        .map(|n| device.create_resource(buffer(n)))
        .collect();
    let [c, v, t, big] = match made {
        Ok(made) => [made[0], made[1], made[2], made[3]],
        Err(e) => {
            note(Err(e));
            return errors;
        }
    };
    note(ic.update(c, 0, &words_le(&[3, 1, 7, 0xF0])));
    note(ic.update(big, 3, &pattern(70_000, 4)));
    note(ic.command(&SoftCommand::Fill { dst: v, value: 9 }));
    note(ic.bind(RT0, Some(t.any())));
    note(ic.command(&SoftCommand::Draw {
        constants: c,
        vertices: v,
        point: RT0,
    }));
    note(ic.flush());
    let lists = std::thread::scope(|scope| {
        scope
            .spawn(|| -> cmdlist::Result<_> {
                let mut dc = device.create_deferred_context()?;
                dc.command(SoftCommand::Copy { dst: v, src: t })?;
                dc.update(big, 70_000, &pattern(20_000, 6))?;
                let inner = dc.finish()?;
                dc.bind(RT0, Some(t.any()))?;
                dc.command(SoftCommand::Draw {
                    constants: c,
                    vertices: v,
                    point: RT0,
                })?;
                dc.execute_command_list(&inner)?;
                dc.command(SoftCommand::Fill { dst: c, value: 1 })?;
                let outer = dc.finish()?;
                Ok((inner, outer))
            })
            .join()
            .expect("the recording thread did not panic")
    });
    match lists {
        Ok((inner, outer)) => {
            for list in [&inner, &outer, &inner] {
                note(ic.execute_command_list(list));
                note(ic.flush());
            }
        }
        Err(e) => note(Err(e)),
    }
    note(ic.command(&SoftCommand::Copy { dst: big, src: t }));
    note(ic.flush());
    note(ic.flush());
    errors
}

/// Each kind of Vulkan call `Faults` names, failing at its 1st, 2nd, ... call until the
/// stream makes no more of them, in each list mode: every failure comes back as a `cmdlist::Error` (the
/// stream's calls, device creation, device destruction), within a minute (no hang) and
/// without a panic; after device destruction no allocation is left and the validation
/// layer reported nothing.
#[test]
fn injected_vulkan_faults_are_errors() {
    let _turn = turn::take();
    if vulkan(ListMode::DriverBuilt, DeviceConfig::default()).is_none() {
        return;
    }
    type Fields = fn(&mut Faults) -> &mut u32;
    let kinds: [(&str, Fields); 5] = [
        ("submit", |f| &mut f.submit),
        ("memory", |f| &mut f.memory),
        ("buffer", |f| &mut f.buffer),
        ("pool", |f| &mut f.pool),
        ("command_buffer", |f| &mut f.command_buffer),
    ];
    for (mode, (name, field)) in ListMode::ALL
        .into_iter()
        .flat_map(|mode| kinds.map(|kind| (mode, kind)))
    {
        let mut calls = 0;
        for nth in 1..200 {
            let mut faults = Faults::default();
            *field(&mut faults) = nth;
            let config = VulkanConfig {
                faults,
                ..VulkanConfig::for_mode(mode)
            };
            let (done, outcome) = mpsc::channel();
            let scenario = std::thread::spawn(move || {
                let (device, mut ic, world) =
                    match cmdlist_vulkan::device(config, DeviceConfig::default()) {
                        Ok(made) => made,
                        Err(e) => {
                            let error = e.downcast::<cmdlist::Error>().map(|e| *e);
                            let _ = done.send(Err(format!("{error:?}")));
                            return;
                        }
                    };
                let errors = fault_stream(&device, &mut ic);
                let destroyed = ic.destroy_device();
                let _ = done.send(Ok((errors, destroyed, world)));
            });
            let outcome = outcome
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|e| {
                    panic!("{mode:?}: {name} #{nth}: no outcome in a minute ({e})")
                });
            // Joined before going on: the scenario's thread still drops its device, and a
            // thread left to drop a Vulkan device as the process exits crashes it.
            scenario.join().expect("the scenario's thread panicked");
            let (errors, destroyed, world) = match outcome {
                Ok(o) => o,
                Err(creation) => {
                    assert!(
                        creation.starts_with("Ok("),
                        "{mode:?}: {name} #{nth}: device creation failed with {creation}"
                    );
                    calls = nth;
                    continue;
                }
            };
            let injected = world.faults_injected();
            if injected == 0 {
                assert_eq!(
                    errors,
                    vec![],
                    "{mode:?}: {name} #{nth}: errors without a fault"
                );
                break;
            }
            calls = nth;
            assert!(
                !errors.is_empty() || destroyed.is_err() || !world.errors().is_empty(),
                "{mode:?}: {name} #{nth}: a fault injected, no error seen"
            );
            assert_eq!(
                world.live_allocations(),
                0,
                "{mode:?}: {name} #{nth}: allocations left"
            );
            assert_eq!(world.zombie_allocations(), 0, "{mode:?}: {name} #{nth}");
            assert_eq!(
                world.validation_messages(),
                Vec::<String>::new(),
                "{mode:?}: {name} #{nth}: {errors:?}"
            );
            let violations = world.violations();
            assert_eq!(violations, vec![], "{mode:?}: {name} #{nth}: {errors:?}");
        }
        eprintln!("{mode:?}: {name}: failed each of {calls} calls in turn");
        // Only driver-built lists have pools of their own.
        let pools = mode == ListMode::DriverBuilt;
        assert!(
            calls > 0 || (name == "pool" && !pools),
            "{mode:?}: {name}: the stream made no such call"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Lists and their contexts' pools
// ---------------------------------------------------------------------------------------

/// Lists outliving their context (the pool freed by its last list, on another thread),
/// lists destroyed while their context records (handed back through the pool's lock),
/// re-executed while a previous execution is pending, with recycling off and on.
#[test]
fn driver_built_lists_outlive_and_race_their_context() {
    let _turn = turn::take();
    for recycle in [false, true] {
        let config = DeviceConfig::default().with_recycle(recycle);
        let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, config) else {
            return;
        };
        let r = device.create_resource(buffer(100)).unwrap();
        let s = device.create_resource(buffer(100)).unwrap();
        // Made by a context that is gone when it runs.
        let orphan = list_of(
            &device,
            vec![SoftCommand::Fill {
                dst: r,
                value: 0x31,
            }],
        );
        std::thread::scope(|scope| {
            let worker = Worker::spawn(scope, &device);
            let record = move |round: u8| {
                move |dc: &mut DeferredContext<_, _>| {
                    for _ in 0..50 {
                        dc.command(SoftCommand::CopyRegion {
                            dst: s,
                            dst_offset: u64::from(round),
                            src: r,
                            src_offset: 0,
                            len: 50,
                        })
                        .unwrap();
                    }
                    dc.update(s, 99, &[round]).unwrap();
                    Arc::new(dc.finish().unwrap())
                }
            };
            worker.send(record(0));
            let mut lists = Vec::new();
            for round in 0..8u8 {
                let list: Arc<CommandList<_, _>> = worker.recv();
                // The worker records the next list while this thread executes, flushes and
                // destroys the older ones (their secondaries go back to the worker's pool).
                if round < 7 {
                    worker.send(record(round + 1));
                }
                // Held GPU: the list executes again while its previous execution pends.
                if round == 2 {
                    world.hold_gpu();
                }
                ic.execute_command_list(&orphan).unwrap();
                ic.execute_command_list(&list).unwrap();
                ic.flush().unwrap();
                ic.execute_command_list(&list).unwrap();
                ic.flush().unwrap();
                if round == 3 {
                    world.release_gpu();
                }
                lists.push(list);
                if lists.len() > 2 {
                    lists.remove(0);
                }
                if round != 2 {
                    // Lets the list clock pass, so the older lists' memory comes back.
                    world.wait_gpu().unwrap();
                }
                ic.flush().unwrap();
            }
            drop(lists);
            ic.flush().unwrap();
            // The context goes (on its thread) before the list it made first.
        });
        world.wait_gpu().unwrap();
        let sa = device.object(s).unwrap().allocation().unwrap();
        let bytes = world.read(sa, 100).unwrap();
        assert_eq!(bytes[7..57], [0x31; 50], "recycle {recycle}");
        assert_eq!(bytes[99], 7);
        drop(orphan);
        ic.flush().unwrap();
        let stats = world.built_stats();
        ic.destroy_device().unwrap();
        let orphaned = world.built_stats().freed_orphaned;
        drop((device, ic));
        assert_clean(world);
        // Recycling on: the worker's lists came back into its cache; off: every Finish
        // renews the context's state (a new pool), so its lists outlive their pool's
        // context and free their secondaries themselves.
        match recycle {
            true => assert!(stats.recycled >= 1, "{stats:?}"),
            false => assert!(stats.freed_orphaned >= 8, "{stats:?}"),
        }
        assert!(orphaned >= 1, "the orphan list");
    }
}

/// Under the submitted list clock the engine recycles and destroys a list once the buffer
/// that executed it is submitted, maybe still running: the driver keeps the list's
/// secondaries and upload memory (and those of the list it chained) until the timeline
/// passes that buffer, while its context records more lists.
#[test]
fn submitted_list_clock_keeps_lists_until_the_gpu_ran_them() {
    let _turn = turn::take();
    for recycle in [true, false] {
        let config = DeviceConfig::default()
            .with_list_clock(Clock::Submitted)
            .with_recycle(recycle);
        let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, config) else {
            return;
        };
        let r = device.create_resource(buffer(256)).unwrap();
        let s = device.create_resource(buffer(256)).unwrap();
        std::thread::scope(|scope| {
            let worker = Worker::spawn(scope, &device);
            let (inner, outer) = worker.run(move |dc| {
                dc.update(s, 0, &pattern(256, 3)).unwrap();
                let inner = Arc::new(dc.finish().unwrap());
                dc.update(r, 0, &pattern(256, 1)).unwrap();
                dc.command(SoftCommand::Fill { dst: r, value: 5 }).unwrap();
                dc.update(r, 0, &pattern(128, 2)).unwrap();
                dc.execute_command_list(&inner).unwrap();
                (Arc::clone(&inner), Arc::new(dc.finish().unwrap()))
            });
            world.hold_gpu();
            ic.execute_command_list(&outer).unwrap();
            ic.flush().unwrap();
            let pending = world.last_submitted();
            drop((inner, outer));
            ic.flush().unwrap();
            // The context records more lists: the engine recycles the two there (or
            // destroyed them already), whose buffer the GPU has not run.
            for round in 0..4u8 {
                let list: Arc<CommandList<_, _>> = worker.run(move |dc| {
                    dc.update(r, 0, &[0xEE; 256]).unwrap();
                    dc.update(s, 0, &[0xDD; 256]).unwrap();
                    Arc::new(dc.finish().unwrap())
                });
                drop(list);
                ic.flush().unwrap();
                assert!(
                    world.completed() < pending,
                    "round {round}: the GPU is held"
                );
            }
            world.release_gpu();
            world.wait_gpu().unwrap();
        });
        let (ra, sa) = (
            device.object(r).unwrap().allocation().unwrap(),
            device.object(s).unwrap().allocation().unwrap(),
        );
        let mut want = vec![5u8; 256];
        want[..128].copy_from_slice(&pattern(128, 2));
        assert_eq!(world.read(ra, 256).unwrap(), want, "recycle {recycle}");
        assert_eq!(
            world.read(sa, 256).unwrap(),
            pattern(256, 3),
            "recycle {recycle}"
        );
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// `VulkanWorld::wait_gpu` (and so the kernel's deallocate, which the engine may call on a
/// creating thread) takes back completed buffers from any thread while the immediate
/// context records into its primary: the immediate context's command pool is still touched
/// by its thread alone (the validation layer's thread-safety checks watch the pool).
#[test]
fn ic_pool_stays_on_its_thread_while_others_wait_for_the_gpu() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let r = device.create_resource(buffer(4096)).unwrap();
    let s = device.create_resource(buffer(64)).unwrap();
    // Its executes record into the primary outside the world's locks.
    let list = list_of(&device, vec![SoftCommand::Fill { dst: s, value: 3 }]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                world.wait_gpu().unwrap();
            }
        });
        for round in 0..300u32 {
            for at in 0..16u64 {
                ic.execute_command_list(&list).unwrap();
                ic.update(r, at * 256, &pattern(256, round as u8)).unwrap();
                ic.command(&SoftCommand::Fill {
                    dst: r,
                    value: round as u8,
                })
                .unwrap();
            }
            ic.update(r, 0, &pattern(4096, round as u8)).unwrap();
            ic.flush().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    world.wait_gpu().unwrap();
    let a = device.object(r).unwrap().allocation().unwrap();
    assert_eq!(world.read(a, 4096).unwrap(), pattern(4096, 299u32 as u8));
    drop(list);
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// A deferred context moved to another thread between recordings (one thread at a time,
/// as the engine allows) is no violation; the pool's record shows both threads.
#[test]
fn driver_built_context_may_move_between_threads() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let r = device.create_resource(buffer(16)).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let id = dc.id();
    dc.command(SoftCommand::Fill { dst: r, value: 1 }).unwrap();
    let (dc, list, other) = std::thread::scope(|s| {
        s.spawn(move || {
            dc.command(SoftCommand::Fill { dst: r, value: 2 }).unwrap();
            let list = dc.finish().unwrap();
            (dc, list, std::thread::current().id())
        })
        .join()
        .unwrap()
    });
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let a = device.object(r).unwrap().allocation().unwrap();
    assert_eq!(world.read(a, 16).unwrap(), vec![2; 16]);
    let (created, threads) = world.pool_threads(id);
    assert_eq!(created, Some(std::thread::current().id()));
    assert_eq!(threads, vec![std::thread::current().id(), other]);
    drop((dc, list));
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// Where the driver builds its lists, an abandoned recording (R-C2) reaches no later list of
/// its context, recycled (its pool, secondaries and upload memory kept for the next
/// recording): the fill and the update abandoned never write their resource, and the next
/// list writes its own resource alone.
#[test]
fn driver_built_abandoned_recording_reaches_no_later_list() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let r = device.create_resource(buffer(64)).unwrap();
    let s = device.create_resource(buffer(64)).unwrap();
    ic.update(r, 0, &[0x11; 64]).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Fill {
        dst: r,
        value: 0x5A,
    })
    .unwrap();
    dc.update(r, 8, &pattern(16, 3)).unwrap();
    dc.abandon().unwrap();
    dc.command(SoftCommand::Fill {
        dst: s,
        value: 0x17,
    })
    .unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let read = |h: Handle<Resource>| {
        let a = device.object(h).unwrap().allocation().unwrap();
        world.read(a, 64).unwrap()
    };
    assert_eq!(read(r), vec![0x11; 64], "the abandoned recording wrote");
    assert_eq!(read(s), vec![0x17; 64]);
    drop((list, dc));
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// A context that outlives its device (R-D3): device destruction destroys its lists on the
/// immediate context's thread while the context is alive, so their secondaries go back
/// through its pool's lock, and the context frees them when it is dropped on its thread.
#[test]
fn driver_built_list_destroyed_while_its_context_lives() {
    let _turn = turn::take();
    let Some((device, ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default()) else {
        return;
    };
    let r = device.create_resource(buffer(16)).unwrap();
    std::thread::scope(|scope| {
        let mut ic = ic;
        let worker = Worker::spawn(scope, &device);
        let list: Arc<CommandList<_, _>> = worker.run(move |dc| {
            dc.command(SoftCommand::Fill { dst: r, value: 6 }).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        world.wait_gpu().unwrap();
        let a = device.object(r).unwrap().allocation().unwrap();
        assert_eq!(world.read(a, 16).unwrap(), vec![6; 16]);
        drop(list);
        worker.run(move |dc| {
            // Recording while the immediate context destroys the device.
            dc.command(SoftCommand::Fill { dst: r, value: 7 }).unwrap();
        });
        // Dropping the immediate context destroys the device with the context alive.
        drop(ic);
        // The worker's context is dropped on its thread as the scope ends.
    });
    // The list went home to its context, which destroyed it as it was dropped.
    assert_eq!(world.built_stats().handed_back, 1);
    // The resource the context held goes with the device's last reference (R-D3).
    drop(device);
    assert_eq!(world.violations(), vec![]);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
    assert_eq!(world.live_allocations(), 0);
}

/// The immediate context's queue and pool belong to its thread: a submit from another
/// thread is flagged (R-T2).
#[test]
fn r_t2_submit_off_the_immediate_thread_is_flagged() {
    let _turn = turn::take();
    let (driver, kernel, world) = match cmdlist_vulkan::new(VulkanConfig::default()) {
        Ok(parts) => parts,
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let imm = driver.create_immediate().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let submission = cmdlist::Submission {
                fence: 1,
                allocations: &[],
                operations: 0,
            };
            kernel.submit(&submission).unwrap();
        });
    });
    kernel.wait_for_fence(1).unwrap();
    let rules: Vec<_> = world.violations().iter().map(|v| v.rule).collect();
    assert_eq!(rules, ["R-T2"]);
    drop(imm);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// Rotated identities (R-X5)
// ---------------------------------------------------------------------------------------

/// A list recorded before a rotation, executed after it (alone and nested), renders into
/// the new identities: the bytes both drivers leave.
fn rotation_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> Vec<Handle<Resource>>
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let r0 = device.create_resource(buffer(64)).unwrap();
    let r1 = device.create_resource(buffer(64)).unwrap();
    let r2 = device.create_resource(buffer(64)).unwrap();
    let v = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: r0,
                first_byte: 8,
                byte_len: 16,
            },
        )
        .unwrap();
    // A draw's target and constants, not rotated; its vertices rotate (r1).
    let r3 = device.create_resource(buffer(64)).unwrap();
    let c = device.create_resource(buffer(16)).unwrap();
    ic.update(r0, 0, &pattern(64, 1)).unwrap();
    ic.update(r1, 0, &pattern(64, 2)).unwrap();
    ic.update(c, 0, &pattern(16, 5)).unwrap();
    *ic.ic_data_mut(r2).unwrap() = 0x33;
    let (list, nested) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut dc = device.create_deferred_context().unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: r2,
                dst_offset: 0,
                src: r0,
                src_offset: 0,
                len: 16,
            })
            .unwrap();
            dc.update(r1, 3, &[9, 9, 9]).unwrap();
            dc.bind(RT0, Some(v.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0xAB,
            })
            .unwrap();
            dc.command(SoftCommand::FillIcByte { dst: r2 }).unwrap();
            dc.bind(RT0, Some(r3.any())).unwrap();
            dc.command(SoftCommand::Draw {
                constants: c,
                vertices: r1,
                point: RT0,
            })
            .unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: r2,
                dst_offset: 40,
                src: r1,
                src_offset: 0,
                len: 8,
            })
            .unwrap();
            let list = dc.finish().unwrap();
            dc.execute_command_list(&list).unwrap();
            dc.command(SoftCommand::Copy { dst: r2, src: r1 }).unwrap();
            (list, dc.finish().unwrap())
        })
        .join()
        .unwrap()
    });
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    ic.rotate_resource_identities(&[r0, r1]).unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.update(r0, 60, &[7; 4]).unwrap();
    ic.execute_command_list(&nested).unwrap();
    ic.flush().unwrap();
    drop((list, nested));
    ic.flush().unwrap();
    vec![r0, r1, r2, r3]
}

#[test]
fn r_x5_lists_recorded_before_a_rotation_run_on_the_new_identities() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let resources = rotation_stream(&device, &mut ic);
        world.wait_gpu().unwrap();
        let got: Vec<Vec<u8>> = resources
            .iter()
            .map(|&h| {
                let a = device.object(h).unwrap().allocation().unwrap();
                world.read(a, 64).unwrap()
            })
            .collect();
        let replays = world.built_stats().replayed_after_rotation;
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);

        let (device, mut ic, soft_world) = soft::device(
            SoftConfig {
                gpu: Gpu::Immediate,
                ..Default::default()
            }
            .with_list_mode(mode),
            DeviceConfig::default(),
        )
        .unwrap();
        let resources = rotation_stream(&device, &mut ic);
        let want: Vec<Vec<u8>> = resources
            .iter()
            .map(|&h| {
                let a = device.object(h).unwrap().allocation().unwrap();
                soft_world.read(a).unwrap()
            })
            .collect();
        ic.destroy_device().unwrap();
        soft_world.assert_clean();
        assert_eq!(got, want, "{mode:?}");
        // Two executes of lists recorded before the rotation (the nested one's inner list
        // runs inside its outer list's replay).
        assert_eq!(replays, if mode == ListMode::DriverBuilt { 2 } else { 0 });
    }
}

// ---------------------------------------------------------------------------------------
// Draws: a compute dispatch each, compared with the soft driver's CPU draw
// ---------------------------------------------------------------------------------------

fn words_le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Draws recorded on four deferred contexts of their own threads (one nesting another's
/// list) and on the immediate context, between transfer work that writes their inputs and
/// reads their targets: every compute↔transfer order the hazard rule must keep. Returns the
/// resources to compare, with their sizes.
fn draw_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> Vec<(Handle<Resource>, u64)>
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let ca = device.create_resource(buffer(16)).unwrap();
    let cb = device.create_resource(buffer(20)).unwrap();
    let verts = device.create_resource(buffer(4099)).unwrap();
    let t1 = device.create_resource(buffer(4096)).unwrap();
    let t2 = device.create_resource(buffer(1000)).unwrap();
    let v1 = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: t1,
                first_byte: 64,
                byte_len: 512,
            },
        )
        .unwrap();
    ic.update(ca, 0, &words_le(&[3, 0x0101_0101, 7, 0xF0F0_0000]))
        .unwrap();
    ic.update(cb, 0, &words_le(&[0x9E37_79B9, 5, 0xFFFF_FFFF, 1]))
        .unwrap();
    ic.update(verts, 0, &pattern(4099, 17)).unwrap();
    let draw = move |constants, point| SoftCommand::Draw {
        constants,
        vertices: verts,
        point,
    };
    std::thread::scope(|scope| {
        let workers: Vec<Worker<D, K>> = (0..4).map(|_| Worker::spawn(scope, device)).collect();
        // A: a draw into a view; new vertex data, then a draw that reads it (transfer then
        // compute in one list).
        let a = workers[0].run(move |dc| {
            dc.bind(RT0, Some(v1.any())).unwrap();
            dc.command(draw(ca, RT0)).unwrap();
            dc.update(verts, 8, &pattern(100, 99)).unwrap();
            dc.bind(RT0, Some(t2.any())).unwrap();
            dc.command(draw(cb, RT0)).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // B: a draw, then a copy of what it wrote (compute then transfer).
        let b = workers[1].run(move |dc| {
            dc.bind(RT0, Some(t2.any())).unwrap();
            dc.command(draw(cb, RT0)).unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: t1,
                dst_offset: 1,
                src: t2,
                src_offset: 0,
                len: 999,
            })
            .unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // C: nothing bound draws nothing; a draw over a whole buffer, then a clear of part
        // of it (write after write).
        let c = workers[2].run(move |dc| {
            dc.command(draw(ca, RT0)).unwrap();
            dc.bind(RT0, Some(t1.any())).unwrap();
            dc.command(draw(ca, RT0)).unwrap();
            dc.command(SoftCommand::ClearView {
                view: v1,
                value: 0x5D,
            })
            .unwrap();
            Arc::new(dc.finish().unwrap())
        });
        // N: A nested, then a draw of its own.
        let a_for_n = Arc::clone(&a);
        let n = workers[3].run(move |dc| {
            dc.execute_command_list(&a_for_n).unwrap();
            dc.bind(RT0, Some(v1.any())).unwrap();
            dc.command(draw(cb, RT0)).unwrap();
            drop(a_for_n);
            Arc::new(dc.finish().unwrap())
        });
        ic.execute_command_list(&c).unwrap();
        // The constants change just before a list reads them.
        ic.update(ca, 4, &words_le(&[0x0202_0202])).unwrap();
        ic.execute_command_list(&a).unwrap();
        ic.execute_command_list(&b).unwrap();
        ic.execute_command_list(&b).unwrap();
        // A draw on the immediate context, then a list that overwrites its target.
        ic.bind(RT0, Some(t1.any())).unwrap();
        ic.command(&draw(cb, RT0)).unwrap();
        ic.flush().unwrap();
        ic.execute_command_list(&n).unwrap();
        ic.update(verts, 0, &pattern(64, 3)).unwrap();
        ic.execute_command_list(&a).unwrap();
        ic.flush().unwrap();
        drop((a, b, c, n));
        ic.flush().unwrap();
    });
    vec![(ca, 16), (cb, 20), (verts, 4099), (t1, 4096), (t2, 1000)]
}

/// The bytes `stream` leaves in the resources it answers, on the soft driver in `mode`.
fn soft_bytes(
    mode: ListMode,
    stream: impl FnOnce(&SoftDevice, &mut SoftImmediate) -> Vec<(Handle<Resource>, u64)>,
) -> Vec<Vec<u8>> {
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            ..Default::default()
        }
        .with_list_mode(mode),
        DeviceConfig::default(),
    )
    .unwrap();
    assert_eq!(device.list_mode(), mode);
    let alive = stream(&device, &mut ic);
    let bytes = alive
        .iter()
        .map(|&(h, _)| {
            world
                .read(device.object(h).unwrap().allocation().unwrap())
                .unwrap()
        })
        .collect();
    ic.destroy_device().unwrap();
    world.assert_clean();
    bytes
}

/// The bytes the Vulkan driver left in `alive`, once the GPU is done.
fn vulkan_bytes(
    device: &VulkanDevice,
    world: &VulkanWorld,
    alive: &[(Handle<Resource>, u64)],
) -> Vec<Vec<u8>> {
    world.wait_gpu().unwrap();
    alive
        .iter()
        .map(|&(h, size)| {
            let a = device.object(h).unwrap().allocation().unwrap();
            world.read(a, size as usize).unwrap()
        })
        .collect()
}

/// Fails at the first byte where the Vulkan driver's resources differ from the soft one's.
fn assert_same_bytes(mode: ListMode, got: &[Vec<u8>], want: &[Vec<u8>]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if let Some(at) = g.iter().zip(w).position(|(g, w)| g != w) {
            panic!(
                "{mode:?}: resource {i} differs first at byte {at}: vulkan {:?}, soft {:?}",
                &g[at..(at + 16).min(g.len())],
                &w[at..(at + 16).min(w.len())]
            );
        }
    }
}

#[test]
fn draws_same_bytes_as_soft_in_every_mode() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let alive = draw_stream(&device, &mut ic);
        let got = vulkan_bytes(&device, &world, &alive);
        assert_same_bytes(mode, &got, &soft_bytes(mode, draw_stream));
        // The draws really wrote: the target is not what transfers alone leave.
        assert!(got[4].iter().any(|&b| b != 0), "{mode:?}");
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// Draws that each read a constant buffer (and every other one a vertex buffer) discarded
/// just before on a deferred context, into targets of their own, with a copy out of the
/// constant buffer and a write into part of it between them, a list that discards the
/// buffer, then nests the first and draws from what it left, a target discarded and then
/// drawn into, and a list executed twice: what
/// a driver-built list's renames (its draws reading a discard's upload bytes in place,
/// `src/rename.rs`) must keep. Returns the resources to compare, with their sizes.
fn discard_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> Vec<(Handle<Resource>, u64)>
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let cb = device.create_resource(dynamic_buffer(64)).unwrap();
    let vb = device.create_resource(dynamic_buffer(256)).unwrap();
    let out = device.create_resource(buffer(64)).unwrap();
    let patch = device.create_resource(buffer(8)).unwrap();
    let targets: Vec<_> = (0..7)
        .map(|_| device.create_resource(buffer(128)).unwrap())
        .collect();
    ic.map_discard(vb)
        .unwrap()
        .copy_from_slice(&pattern(256, 5));
    ic.unmap(vb).unwrap();
    ic.update(patch, 0, &pattern(8, 200)).unwrap();
    let draw = move || SoftCommand::Draw {
        constants: cb,
        vertices: vb,
        point: RT0,
    };
    let last = targets[6];
    let drawn = device.create_resource(dynamic_buffer(128)).unwrap();
    std::thread::scope(|scope| {
        let workers: Vec<Worker<D, K>> = (0..2).map(|_| Worker::spawn(scope, device)).collect();
        let own = targets[..6].to_vec();
        let a = workers[0].run(move |dc| {
            for (i, &target) in own.iter().enumerate() {
                dc.map_discard(cb)
                    .unwrap()
                    .copy_from_slice(&pattern(64, i as u8));
                dc.unmap(cb).unwrap();
                if i % 2 == 1 {
                    dc.map_discard(vb)
                        .unwrap()
                        .copy_from_slice(&pattern(256, 50 + i as u8));
                    dc.unmap(vb).unwrap();
                }
                if i == 2 {
                    // Reads the discard's bytes from the buffer.
                    dc.command(SoftCommand::Copy { dst: out, src: cb }).unwrap();
                }
                if i == 4 {
                    // Writes part of the buffer over the discard's bytes.
                    dc.command(SoftCommand::CopyRegion {
                        dst: cb,
                        dst_offset: 8,
                        src: patch,
                        src_offset: 0,
                        len: 8,
                    })
                    .unwrap();
                }
                dc.bind(RT0, Some(target.any())).unwrap();
                dc.command(draw()).unwrap();
            }
            // A target discarded, then drawn into: the draw writes over the discard's bytes.
            dc.map_discard(drawn)
                .unwrap()
                .copy_from_slice(&pattern(128, 77));
            dc.unmap(drawn).unwrap();
            dc.bind(RT0, Some(drawn.any())).unwrap();
            dc.command(draw()).unwrap();
            Arc::new(dc.finish().unwrap())
        });
        let a_for_n = Arc::clone(&a);
        let n = workers[1].run(move |dc| {
            dc.map_discard(cb)
                .unwrap()
                .copy_from_slice(&pattern(64, 99));
            dc.unmap(cb).unwrap();
            dc.execute_command_list(&a_for_n).unwrap();
            dc.bind(RT0, Some(last.any())).unwrap();
            dc.command(draw()).unwrap();
            drop(a_for_n);
            Arc::new(dc.finish().unwrap())
        });
        ic.execute_command_list(&a).unwrap();
        ic.execute_command_list(&a).unwrap();
        ic.flush().unwrap();
        ic.execute_command_list(&n).unwrap();
        ic.flush().unwrap();
        drop((a, n));
    });
    let mut alive = vec![(cb, 64), (vb, 256), (out, 64)];
    alive.extend(targets.iter().map(|&t| (t, 128)));
    alive.push((drawn, 128));
    alive
}

#[test]
fn discards_read_in_place_same_bytes_as_soft_in_every_mode() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let alive = discard_stream(&device, &mut ic);
        let got = vulkan_bytes(&device, &world, &alive);
        assert_same_bytes(mode, &got, &soft_bytes(mode, discard_stream));
        // The draws really wrote.
        assert!(
            got[3..].iter().all(|t| t.iter().any(|&b| b != 0)),
            "{mode:?}"
        );
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// An outer driver-built list that only executes an inner one, both recorded before the
/// immediate context renames (R-M5) the two buffers the inner list reads: a copy out of the
/// vertex buffer and a draw from it and the constant buffer. The outer list runs once
/// before the renames (its secondaries, a snapshot of what it wrote taken on the immediate
/// context) and once after, where its secondaries name the old buffers: the execute must
/// find the inner list's resources moved, and its replay go into the inner list's packets.
/// Returns the resources to compare, with their sizes, and whether both buffers renamed.
fn nested_rename_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> (Vec<(Handle<Resource>, u64)>, bool)
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let cb = device.create_resource(dynamic_buffer(16)).unwrap();
    let vb = device.create_resource(dynamic_buffer(64)).unwrap();
    let out = device.create_resource(buffer(64)).unwrap();
    let target = device.create_resource(buffer(128)).unwrap();
    let [out_before, target_before] = [64, 128].map(|n| device.create_resource(buffer(n)).unwrap());
    let discard = |ic: &mut ImmediateContext<D, K>, cb_words: [u32; 4], vb_seed| {
        ic.map_discard(cb)
            .unwrap()
            .copy_from_slice(&words_le(&cb_words));
        ic.unmap(cb).unwrap();
        ic.map_discard(vb)
            .unwrap()
            .copy_from_slice(&pattern(64, vb_seed));
        ic.unmap(vb).unwrap();
    };
    discard(ic, [3, 0x0101_0101, 7, 0xF0F0_0000], 1);
    let outer = std::thread::scope(|scope| {
        let worker: Worker<D, K> = Worker::spawn(scope, device);
        worker.run(move |dc| {
            dc.command(SoftCommand::Copy { dst: out, src: vb }).unwrap();
            dc.bind(RT0, Some(target.any())).unwrap();
            dc.command(SoftCommand::Draw {
                constants: cb,
                vertices: vb,
                point: RT0,
            })
            .unwrap();
            let inner = dc.finish().unwrap();
            dc.execute_command_list(&inner).unwrap();
            dc.finish().unwrap()
        })
    });
    ic.execute_command_list(&outer).unwrap();
    ic.command(&SoftCommand::Copy {
        dst: out_before,
        src: out,
    })
    .unwrap();
    ic.command(&SoftCommand::Copy {
        dst: target_before,
        src: target,
    })
    .unwrap();
    ic.flush().unwrap();
    let allocation = |h: Handle<Resource>| device.object(h).unwrap().allocation();
    let held = [allocation(cb), allocation(vb)];
    discard(ic, [0x9E37_79B9, 5, 0xFFFF_FFFF, 1], 2);
    let renamed = held[0] != allocation(cb) && held[1] != allocation(vb);
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
    drop(outer);
    ic.flush().unwrap();
    let alive = vec![
        (out, 64),
        (target, 128),
        (out_before, 64),
        (target_before, 128),
    ];
    (alive, renamed)
}

#[test]
fn a_nested_list_recorded_before_a_rename_reads_the_new_memory() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let before = world.built_stats().replayed_after_rotation;
        let (alive, renamed) = nested_rename_stream(&device, &mut ic);
        let got = vulkan_bytes(&device, &world, &alive);
        let replays = world.built_stats().replayed_after_rotation - before;
        let want = soft_bytes(mode, |device, ic| nested_rename_stream(device, ic).0);
        assert_same_bytes(mode, &got, &want);
        assert!(renamed, "{mode:?}: the discards renamed");
        // The new bytes, not the old ones: the copy and the draw differ from the snapshot.
        assert_eq!(got[0], pattern(64, 2), "{mode:?}");
        assert_ne!(got[1], got[3], "{mode:?}: the draw read the new bytes");
        // The execute after the renames replays; the one before runs the secondaries.
        let want_replays = u64::from(mode == ListMode::DriverBuilt);
        assert_eq!(replays, want_replays, "{mode:?}");
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// FillBound into render targets a driver-built list discarded earlier in the same
/// recording: a view of part of one (the fill over the middle of the discard's bytes), and
/// a whole one whose discard a draw read in place first. The fill must land in the
/// resource's bytes after the discard's, not under them (the discard's copy into the
/// resource, kept pending by the rename, must come first). The list runs twice. Returns the
/// resources to compare, with their sizes.
fn discard_fill_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> Vec<(Handle<Resource>, u64)>
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let partly = device.create_resource(dynamic_buffer(128)).unwrap();
    let whole = device.create_resource(dynamic_buffer(64)).unwrap();
    let vb = device.create_resource(buffer(64)).unwrap();
    let target = device.create_resource(buffer(64)).unwrap();
    let middle = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: partly,
                first_byte: 16,
                byte_len: 64,
            },
        )
        .unwrap();
    ic.update(vb, 0, &pattern(64, 40)).unwrap();
    let list = std::thread::scope(|scope| {
        let worker: Worker<D, K> = Worker::spawn(scope, device);
        worker.run(move |dc| {
            dc.map_discard(partly)
                .unwrap()
                .copy_from_slice(&pattern(128, 3));
            dc.unmap(partly).unwrap();
            dc.bind(RT0, Some(middle.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0xC7,
            })
            .unwrap();
            dc.map_discard(whole)
                .unwrap()
                .copy_from_slice(&pattern(64, 9));
            dc.unmap(whole).unwrap();
            dc.bind(RT0, Some(target.any())).unwrap();
            dc.command(SoftCommand::Draw {
                constants: whole,
                vertices: vb,
                point: RT0,
            })
            .unwrap();
            dc.bind(RT0, Some(whole.any())).unwrap();
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 0x3D,
            })
            .unwrap();
            dc.finish().unwrap()
        })
    });
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    drop(list);
    ic.flush().unwrap();
    vec![(partly, 128), (whole, 64), (target, 64)]
}

#[test]
fn fills_into_discarded_targets_same_bytes_as_soft_in_every_mode() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let alive = discard_fill_stream(&device, &mut ic);
        let got = vulkan_bytes(&device, &world, &alive);
        assert_same_bytes(mode, &got, &soft_bytes(mode, discard_fill_stream));
        // The fills and the discards' bytes around them, and a draw that read the discard.
        let mut partly = pattern(128, 3);
        partly[16..80].fill(0xC7);
        assert_eq!(got[0], partly, "{mode:?}");
        assert_eq!(got[1], [0x3D; 64], "{mode:?}");
        assert!(got[2].iter().any(|&b| b != 0), "{mode:?}: the draw wrote");
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// A driver-built list of draws, each after a Map(DISCARD) of its constant buffer, into one
/// target: the draws read the discards' upload bytes in place, so the only barriers are the
/// secondary's first and one between draws (write after write on the target), not three
/// more per draw for a copy into the buffer the previous draw read.
#[test]
fn renamed_discards_need_no_barriers_of_their_own() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    const DRAWS: u64 = 8;
    let cb = device.create_resource(dynamic_buffer(64)).unwrap();
    let vb = device.create_resource(buffer(256)).unwrap();
    let target = device.create_resource(buffer(256)).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let before = world.hazard_barriers();
    dc.bind(RT0, Some(target.any())).unwrap();
    for i in 0..DRAWS {
        dc.map_discard(cb).unwrap().fill(i as u8);
        dc.unmap(cb).unwrap();
        dc.command(SoftCommand::Draw {
            constants: cb,
            vertices: vb,
            point: RT0,
        })
        .unwrap();
    }
    let list = dc.finish().unwrap();
    // Counted when the secondary ends, at Finish; the copy into the buffer at the end meets
    // nothing the draws touched.
    assert_eq!(world.hazard_barriers() - before, DRAWS);
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let last = world
        .read(device.object(cb).unwrap().allocation().unwrap(), 64)
        .unwrap();
    assert_eq!(last, vec![DRAWS as u8 - 1; 64], "the last discard's bytes");
    drop((list, dc));
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// The compute barriers have teeth too: without the hazard rule's barriers, a draw reading
/// what an update wrote and a copy reading what the draw wrote are reported.
#[test]
fn draw_hazards_reported_without_the_barriers() {
    let _turn = turn::take();
    let config = VulkanConfig {
        hazard_barriers: false,
        ..VulkanConfig::for_mode(ListMode::DriverBuilt)
    };
    let Some((device, mut ic, world)) = vulkan_with(config, DeviceConfig::default()) else {
        return;
    };
    if !world.validation_enabled() {
        eprintln!("skipped: no validation layer to report hazards");
        return;
    }
    let c = device.create_resource(buffer(16)).unwrap();
    let v = device.create_resource(buffer(64)).unwrap();
    let t = device.create_resource(buffer(64)).unwrap();
    let s = device.create_resource(buffer(64)).unwrap();
    ic.update(v, 0, &pattern(64, 5)).unwrap();
    ic.bind(RT0, Some(t.any())).unwrap();
    ic.command(&SoftCommand::Draw {
        constants: c,
        vertices: v,
        point: RT0,
    })
    .unwrap();
    ic.command(&SoftCommand::Copy { dst: s, src: t }).unwrap();
    ic.flush().unwrap();
    ic.destroy_device().unwrap();
    let messages = world.validation_messages();
    let hazards = messages
        .iter()
        .filter(|m| m.contains("SYNC-HAZARD"))
        .count();
    assert!(hazards >= 2, "hazards not reported: {messages:#?}");
}

/// The shaders in `drivers/vulkan/shaders`, each a `.comp` source and its `.spv`.
const SHADERS: &[&str] = &["draw", "blt"];

/// Storage-buffer descriptors cover at most `maxStorageBufferRange` bytes: a draw reading a
/// view or resource whose bytes end within it runs, one reading a resource larger than
/// it is refused (`Unsupported`), on the immediate context and in a list, and the
/// validation layer stays silent.
#[test]
fn draws_past_the_storage_buffer_range_are_unsupported() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let limit = world
        .max_storage_buffer_range()
        .expect("lavapipe has push descriptors");
    if limit > 1 << 30 {
        eprintln!("skipped: maxStorageBufferRange {limit} is too large to exceed here");
        ic.destroy_device().unwrap();
        return;
    }
    let big = device.create_resource(buffer(limit + 64)).unwrap();
    let c = device.create_resource(buffer(16)).unwrap();
    let verts = device.create_resource(buffer(64)).unwrap();
    let t = device.create_resource(buffer(256)).unwrap();
    let rtv = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: big,
                first_byte: 0,
                byte_len: 256,
            },
        )
        .unwrap();
    ic.update(c, 0, &words_le(&[3, 0x0101_0101, 7, 0xF0F0_0000]))
        .unwrap();
    ic.update(verts, 0, &pattern(64, 17)).unwrap();
    // The first 256 bytes of the large resource, as a target: within the range.
    ic.bind(RT0, Some(rtv.any())).unwrap();
    let fits = SoftCommand::Draw {
        constants: c,
        vertices: verts,
        point: RT0,
    };
    ic.command(&fits).unwrap();
    ic.bind(RT0, Some(t.any())).unwrap();
    let past = SoftCommand::Draw {
        constants: c,
        vertices: big,
        point: RT0,
    };
    assert_eq!(ic.command(&past), Err(cmdlist::Error::Unsupported));
    let refused = std::thread::scope(|s| {
        s.spawn(|| {
            let mut dc = device.create_deferred_context().unwrap();
            dc.bind(RT0, Some(t.any())).unwrap();
            dc.command(past)
        })
        .join()
        .unwrap()
    });
    assert_eq!(refused, Err(cmdlist::Error::Unsupported));
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let a = device.object(big).unwrap().allocation().unwrap();
    assert_ne!(
        world.read(a, 256).unwrap(),
        vec![0; 256],
        "the draw that fits ran"
    );
    let t_a = device.object(t).unwrap().allocation().unwrap();
    assert_eq!(
        world.read(t_a, 256).unwrap(),
        vec![0; 256],
        "nothing else ran"
    );
    ic.destroy_device().unwrap();
    assert_eq!(world.violations(), vec![]);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
    assert!(world
        .errors()
        .iter()
        .all(|(_, e)| *e == cmdlist::Error::Unsupported));
}

/// The shipped SPIR-V is what its GLSL source compiles to (`glslangValidator -V`), where
/// the compiler is installed; required with `CMDLIST_SHADERS_REQUIRED=1`.
#[test]
fn shipped_spirv_matches_its_source() {
    let _turn = turn::take();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let out = std::env::temp_dir().join(format!("cmdlist-vulkan-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for name in SHADERS {
        let spv = out.join(format!("{name}.spv"));
        let run = std::process::Command::new("glslangValidator")
            .arg("-V")
            .arg(dir.join(format!("{name}.comp")))
            .arg("-o")
            .arg(&spv)
            .output();
        match run {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "{name}.comp does not compile: {}",
                String::from_utf8_lossy(&o.stdout)
            ),
            Err(e) if std::env::var("CMDLIST_SHADERS_REQUIRED").is_ok_and(|v| v == "1") => {
                panic!("CMDLIST_SHADERS_REQUIRED=1 but glslangValidator did not run: {e}")
            }
            Err(e) => {
                eprintln!(
                    "skipped: glslangValidator did not run ({e}); apt-get install glslang-tools"
                );
                return;
            }
        }
        let built = std::fs::read(&spv).unwrap();
        let shipped = std::fs::read(dir.join(format!("{name}.spv"))).unwrap();
        assert!(
            built == shipped,
            "shaders/{name}.spv is stale: run `glslangValidator -V {name}.comp -o {name}.spv` in \
             drivers/vulkan/shaders"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

// ---------------------------------------------------------------------------------------
// DXGI: the Blt on the GPU against the CPU reference, and the headless present
// ---------------------------------------------------------------------------------------

use cmdlist::dxgi::reference::{self, Pixels, PixelsMut};
use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation,
};
use cmdlist::{BindFlags, Texture2d};

/// The formats the GPU Blt supports (the crate docs): the 32-bit ones with 8-bit channels.
const RGBA8: [DisplayFormat; 4] = [
    DisplayFormat::R8G8B8A8Unorm,
    DisplayFormat::R8G8B8A8UnormSrgb,
    DisplayFormat::B8G8R8A8Unorm,
    DisplayFormat::B8G8R8X8Unorm,
];

fn texture(width: u32, height: u32, format: DisplayFormat) -> cmdlist::ResourceDesc {
    let shape = Texture2d {
        width,
        height,
        format: format.to_dxgi(),
        ..Texture2d::default()
    };
    cmdlist::ResourceDesc::texture(shape, BindFlags::PRESENT | BindFlags::RENDER_TARGET).unwrap()
}

/// The reference Blt's bytes for the same source and destination.
#[allow(clippy::too_many_arguments)]
fn reference_blt(
    src: &[u8],
    (sw, sh, sf): (u32, u32, DisplayFormat),
    src_rect: Rect,
    dst: &[u8],
    (dw, dh, df): (u32, u32, DisplayFormat),
    dst_rect: Rect,
) -> Vec<u8> {
    let mut out = dst.to_vec();
    reference::blt(
        Pixels {
            width: sw,
            height: sh,
            samples: 1,
            format: sf,
            bytes: src,
        },
        src_rect,
        PixelsMut {
            width: dw,
            height: dh,
            format: df,
            bytes: &mut out,
        },
        dst_rect,
        Rotation::Identity,
    )
    .unwrap();
    out
}

/// The largest difference of one byte (one 8-bit channel) between the two.
fn max_code_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

/// One Blt on the GPU: `src` (its bytes `pixels`) into a destination that held `before`;
/// returns the destination's bytes and the reference's.
#[allow(clippy::too_many_arguments)]
fn gpu_blt(
    device: &VulkanDevice,
    ic: &mut VulkanImmediateContext,
    world: &VulkanWorld,
    (sw, sh, sf): (u32, u32, DisplayFormat),
    pixels: &[u8],
    src_rect: Option<Rect>,
    (dw, dh, df): (u32, u32, DisplayFormat),
    before: &[u8],
    dst_rect: Rect,
) -> (Vec<u8>, Vec<u8>) {
    let src = device.create_resource(texture(sw, sh, sf)).unwrap();
    let dst = device.create_resource(texture(dw, dh, df)).unwrap();
    ic.update(src, 0, pixels).unwrap();
    ic.update(dst, 0, before).unwrap();
    let stretch = src_rect.unwrap_or(Rect::whole(sw, sh)).width() != dst_rect.width()
        || src_rect.unwrap_or(Rect::whole(sw, sh)).height() != dst_rect.height();
    let flags = match stretch {
        true => BltFlags::CONVERT | BltFlags::STRETCH,
        false => BltFlags::CONVERT,
    };
    ic.blt(&BltArgs {
        dst,
        dst_subresource: 0,
        dst_rect,
        src,
        src_subresource: 0,
        src_rect,
        flags,
        rotation: Rotation::Identity,
    })
    .unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let a = device.object(dst).unwrap().allocation().unwrap();
    let got = world.read(a, before.len()).unwrap();
    let want = reference_blt(
        pixels,
        (sw, sh, sf),
        src_rect.unwrap_or(Rect::whole(sw, sh)),
        before,
        (dw, dh, df),
        dst_rect,
    );
    device.destroy(src).unwrap();
    device.destroy(dst).unwrap();
    (got, want)
}

/// R-X6, R-X7 on the GPU: every pair of the supported formats, unstretched (exact: every
/// tap on a texel centre, so the conversion is the reference's integer one), stretched 2x
/// and shrunk to a sub-rectangle (at most one code per channel from the reference: the
/// filter weights, the sRGB curves and the divisions are the GPU's `float`s, where the
/// reference works in f32 with f64 curves; a code boundary crossed by an ulp moves a code by
/// one, never more). The rest of the destination is untouched.
#[test]
fn r_x6_r_x7_gpu_blt_matches_the_reference() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let (sw, sh) = (7u32, 5u32);
    let pixels = pattern((sw * sh * 4) as usize, 41);
    for sf in RGBA8 {
        for df in RGBA8 {
            // Unstretched, whole to whole: exact.
            let before = pattern((sw * sh * 4) as usize, 7);
            let (got, want) = gpu_blt(
                &device,
                &mut ic,
                &world,
                (sw, sh, sf),
                &pixels,
                None,
                (sw, sh, df),
                &before,
                Rect::whole(sw, sh),
            );
            assert_eq!(got, want, "{sf:?} -> {df:?} unstretched");
            // 2x into the middle of a larger destination.
            let (dw, dh) = (2 * sw + 3, 2 * sh + 2);
            let before = pattern((dw * dh * 4) as usize, 9);
            let rect = Rect {
                left: 1,
                top: 1,
                right: 1 + 2 * sw,
                bottom: 1 + 2 * sh,
            };
            let (got, want) = gpu_blt(
                &device,
                &mut ic,
                &world,
                (sw, sh, sf),
                &pixels,
                None,
                (dw, dh, df),
                &before,
                rect,
            );
            let diff = max_code_diff(&got, &want);
            assert!(diff <= 1, "{sf:?} -> {df:?} 2x: {diff} codes off");
            // A source sub-rectangle shrunk.
            let src_rect = Rect {
                left: 1,
                top: 1,
                right: 7,
                bottom: 5,
            };
            let before = pattern((4 * 3 * 4) as usize, 3);
            let (got, want) = gpu_blt(
                &device,
                &mut ic,
                &world,
                (sw, sh, sf),
                &pixels,
                Some(src_rect),
                (4, 3, df),
                &before,
                Rect::whole(3, 2),
            );
            let diff = max_code_diff(&got, &want);
            assert!(diff <= 1, "{sf:?} -> {df:?} shrunk: {diff} codes off");
        }
    }
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// The main job's Blt (examples/frame): an `R8G8B8A8_UNORM_SRGB` canvas stretched 2x into a
/// `B8G8R8A8_UNORM` back buffer, filtered in linear light: within one code of the reference.
#[test]
fn main_jobs_blt_on_the_gpu_within_one_code() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let (cw, ch) = (192u32, 112u32); // examples/frame: CANVAS_W, CANVAS_H
    let canvas: Vec<u8> = (0..cw * ch)
        .flat_map(|i| {
            let (x, y) = (i % cw, i / cw);
            [
                (x * 255 / cw) as u8,
                (y * 255 / ch) as u8,
                ((x ^ y) * 3) as u8,
                255,
            ]
        })
        .collect();
    let before = vec![0u8; (4 * cw * ch * 4) as usize];
    let (got, want) = gpu_blt(
        &device,
        &mut ic,
        &world,
        (cw, ch, DisplayFormat::R8G8B8A8UnormSrgb),
        &canvas,
        None,
        (2 * cw, 2 * ch, DisplayFormat::B8G8R8A8Unorm),
        &before,
        Rect::whole(2 * cw, 2 * ch),
    );
    let diff = max_code_diff(&got, &want);
    let off = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    eprintln!("main job's Blt: {off} of {} bytes one code off", got.len());
    assert!(got.iter().any(|&b| b != 0), "nothing written");
    assert!(diff <= 1, "{diff} codes off");
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// Formats the GPU Blt does not cover are refused as unsupported, nothing written.
#[test]
fn gpu_blt_refuses_what_it_does_not_cover() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    for (sf, df) in [
        (
            DisplayFormat::R16G16B16A16Float,
            DisplayFormat::B8G8R8A8Unorm,
        ),
        (DisplayFormat::B8G8R8A8Unorm, DisplayFormat::B5G6R5Unorm),
        (
            DisplayFormat::R10G10B10A2Unorm,
            DisplayFormat::R8G8B8A8Unorm,
        ),
    ] {
        let src = device.create_resource(texture(4, 4, sf)).unwrap();
        let dst = device.create_resource(texture(4, 4, df)).unwrap();
        let result = ic.blt(&BltArgs {
            dst,
            dst_subresource: 0,
            dst_rect: Rect::whole(4, 4),
            src,
            src_subresource: 0,
            src_rect: None,
            flags: BltFlags::CONVERT,
            rotation: Rotation::Identity,
        });
        assert_eq!(result, Err(cmdlist::Error::Unsupported), "{sf:?} -> {df:?}");
        device.destroy(src).unwrap();
        device.destroy(dst).unwrap();
    }
    ic.destroy_device().unwrap();
    // Each refusal is reported through the kernel (R-E2), and nothing else went wrong.
    let unsupported = (cmdlist::ContextId::Immediate, cmdlist::Error::Unsupported);
    assert_eq!(world.errors(), vec![unsupported; 3]);
    assert_eq!(world.violations(), vec![]);
    assert_eq!(world.validation_messages(), Vec::<String>::new());
    assert_eq!(world.live_allocations(), 0);
}

/// R-X1, headless: the present submits the buffer first, and the screen then holds the
/// presented surface (its current identity after a rotation); with a destination, the
/// surface is copied into it too.
#[test]
fn r_x1_present_copies_the_surface_to_the_screen() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        assert_eq!(world.screen(), None);
        let (w, h) = (16u32, 8u32);
        let chain = [
            device
                .create_resource(texture(w, h, DisplayFormat::B8G8R8A8Unorm))
                .unwrap(),
            device
                .create_resource(texture(w, h, DisplayFormat::B8G8R8A8Unorm))
                .unwrap(),
        ];
        let copy = device
            .create_resource(texture(w, h, DisplayFormat::B8G8R8X8Unorm))
            .unwrap();
        let frame = |i: u8| pattern((w * h * 4) as usize, i);
        ic.update(chain[0], 0, &frame(1)).unwrap();
        ic.update(chain[1], 0, &frame(2)).unwrap();
        let present = |ic: &mut VulkanImmediateContext, dst| {
            ic.present(&PresentArgs {
                src: chain[0],
                src_subresource: 0,
                dst,
                dxgi_context: DxgiContext(0),
                flags: PresentFlags::FLIP,
                flip_interval: 1,
            })
            .unwrap()
        };
        present(&mut ic, None);
        assert_eq!(world.screen().unwrap(), frame(1), "{mode:?}");
        ic.rotate_resource_identities(&chain).unwrap();
        // The buffer holding the present's copy goes first: nothing pending after it.
        present(&mut ic, Some((copy, 0)));
        assert_eq!(
            world.screen().unwrap(),
            frame(2),
            "{mode:?}: after the rotation"
        );
        let a = device.object(copy).unwrap().allocation().unwrap();
        let mut want = frame(2);
        for px in want.chunks_exact_mut(4) {
            px[3] = 0xFF;
        }
        assert_eq!(
            world.read(a, want.len()).unwrap(),
            want,
            "{mode:?}: the copy"
        );
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

// ---------------------------------------------------------------------------------------
// Map(NO_OVERWRITE): a ring of appends after one discard (R-M2, R-M3)
// ---------------------------------------------------------------------------------------

/// A ring's stretch: the 16 bytes of a draw's constants.
const STRETCH: usize = 16;
/// Stretches in a ring.
const STRETCHES: usize = 6;
/// A ring's bytes.
const RING: usize = STRETCH * STRETCHES;

/// Stretch `k` of a ring pass `seed` writes.
fn stretch(seed: u8, k: usize) -> Vec<u8> {
    pattern(STRETCH, seed.wrapping_add(13 * k as u8))
}

/// `out`'s bytes after [`record_ring`] of `seed`: each pass's stretches in turn.
fn ring_out(seed: u8) -> Vec<u8> {
    (0..2)
        .flat_map(|pass| (0..STRETCHES).map(move |k| stretch(seed + 101 * pass, k)))
        .flatten()
        .collect()
}

/// Records a ring on `dc`, twice (it wraps: a second Map(DISCARD) in the recording): a
/// discard writes stretch 0, then each Map(NO_OVERWRITE) checks that the pass's stretches
/// so far are there (and zeroes after them) and appends the next; between the appends a
/// draw reads the ring's first stretch as its constants and a copy reads the stretch
/// before into `out`, so the GPU reads stretches the CPU wrote earlier while later ones
/// are written.
fn record_ring<D, K>(
    dc: &mut DeferredContext<D, K>,
    [ring, out, target, vertices]: [Handle<Resource>; 4],
    seed: u8,
) where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    dc.bind(RT0, Some(target.any())).unwrap();
    for pass in 0..2 {
        let seed = seed + 101 * pass as u8;
        let copy_out = |k: usize| SoftCommand::CopyRegion {
            dst: out,
            dst_offset: ((pass * STRETCHES + k) * STRETCH) as u64,
            src: ring,
            src_offset: (k * STRETCH) as u64,
            len: STRETCH as u64,
        };
        let bytes = dc.map_discard(ring).unwrap();
        // Undefined until written (R-M1): the whole ring handed out.
        assert_eq!(bytes.len(), RING, "a discard hands out the whole ring");
        bytes[..STRETCH].copy_from_slice(&stretch(seed, 0));
        dc.unmap(ring).unwrap();
        for k in 1..STRETCHES {
            dc.command(SoftCommand::Draw {
                constants: ring,
                vertices,
                point: RT0,
            })
            .unwrap();
            dc.command(copy_out(k - 1)).unwrap();
            let bytes = dc.map_no_overwrite(ring).unwrap();
            assert_eq!(bytes.len(), RING);
            for j in 0..k {
                let kept = &bytes[j * STRETCH..][..STRETCH];
                assert_eq!(
                    kept,
                    stretch(seed, j),
                    "pass {pass}, append {k}: stretch {j}"
                );
            }
            assert!(
                bytes[k * STRETCH..].iter().all(|&b| b == 0),
                "pass {pass}, append {k}: past the appends"
            );
            bytes[k * STRETCH..][..STRETCH].copy_from_slice(&stretch(seed, k));
            dc.unmap(ring).unwrap();
        }
        dc.command(copy_out(STRETCHES - 1)).unwrap();
    }
}

/// Two deferred contexts on their own threads each record a ring ([`record_ring`]): one on
/// a dynamic constant buffer, one on a dynamic vertex buffer also bound as a shader
/// resource (R-M3: both need the driver's `MapCaps`, or a vertex bind); a third list nests
/// the first. The immediate context executes them, overwrites the first ring (its own
/// Map(DISCARD)) and `out`, then runs the first again, nested: its discard brings the ring
/// back. Returns the resources to compare, with their sizes.
fn ring_stream<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> Vec<(Handle<Resource>, u64)>
where
    D: Driver<Command = SoftCommand, IcData = u64>,
    K: Kernel,
{
    let ring = |bind| {
        let desc = ResourceDesc {
            bind,
            ..dynamic_buffer(RING as u64)
        };
        device.create_resource(desc).unwrap()
    };
    let r0 = ring(BindFlags::CONSTANT_BUFFER);
    let r1 = ring(BindFlags::VERTEX_BUFFER | BindFlags::SHADER_RESOURCE);
    let out_len = 2 * RING as u64;
    let [o0, o1] = [0; 2].map(|_| device.create_resource(buffer(out_len)).unwrap());
    let [t0, t1] = [0; 2].map(|_| device.create_resource(buffer(256)).unwrap());
    let verts = device.create_resource(buffer(1024)).unwrap();
    ic.update(verts, 0, &pattern(1024, 41)).unwrap();
    std::thread::scope(|scope| {
        let workers: Vec<Worker<D, K>> = (0..2).map(|_| Worker::spawn(scope, device)).collect();
        let a = workers[0].run(move |dc| {
            record_ring(dc, [r0, o0, t0, verts], 1);
            Arc::new(dc.finish().unwrap())
        });
        let b = workers[1].run(move |dc| {
            record_ring(dc, [r1, o1, t1, verts], 2);
            Arc::new(dc.finish().unwrap())
        });
        let a_for_n = Arc::clone(&a);
        let n = workers[1].run(move |dc| {
            dc.execute_command_list(&a_for_n).unwrap();
            dc.command(SoftCommand::Copy { dst: t1, src: r0 }).unwrap();
            drop(a_for_n);
            Arc::new(dc.finish().unwrap())
        });
        ic.execute_command_list(&a).unwrap();
        ic.execute_command_list(&b).unwrap();
        ic.flush().unwrap();
        ic.map_discard(r0).unwrap().fill(0xEE);
        ic.unmap(r0).unwrap();
        ic.update(o0, 0, &[0x77; 2 * RING]).unwrap();
        ic.execute_command_list(&n).unwrap();
        ic.flush().unwrap();
        drop((a, b, n));
    });
    vec![
        (r0, RING as u64),
        (r1, RING as u64),
        (o0, out_len),
        (o1, out_len),
        (t0, 256),
        (t1, 256),
    ]
}

fn soft_ring_bytes(mode: ListMode) -> Vec<Vec<u8>> {
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            ..Default::default()
        }
        .with_list_mode(mode),
        DeviceConfig::default(),
    )
    .unwrap();
    assert_eq!(device.list_mode(), mode);
    let alive = ring_stream(&device, &mut ic);
    let bytes = alive
        .iter()
        .map(|&(h, _)| {
            world
                .read(device.object(h).unwrap().allocation().unwrap())
                .unwrap()
        })
        .collect();
    ic.destroy_device().unwrap();
    world.assert_clean();
    bytes
}

/// R-M2 on Vulkan, in every list mode: a ring of Map(NO_OVERWRITE) appends after one
/// Map(DISCARD), wrapping once within the recording, interleaved with draws and copies that
/// read earlier stretches, hands out the discard's bytes with the appends so far (checked
/// in the recording), and leaves the bytes the soft driver leaves: every stretch read
/// where it was written, the ring with its last pass, also when the list runs again
/// nested after the immediate context overwrote the ring. The validation layer stays
/// silent (the appends, written into a driver-built list's upload memory after the copy
/// that reads them was recorded, reach the GPU with the submit).
#[test]
fn no_overwrite_ring_same_bytes_as_soft_in_every_mode() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode, DeviceConfig::default()) else {
            return;
        };
        let alive = ring_stream(&device, &mut ic);
        world.wait_gpu().unwrap();
        let got: Vec<Vec<u8>> = alive
            .iter()
            .map(|&(h, size)| {
                let a = device.object(h).unwrap().allocation().unwrap();
                world.read(a, size as usize).unwrap()
            })
            .collect();
        let want = soft_ring_bytes(mode);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "{mode:?}: resource {i}'s size");
            if let Some(at) = g.iter().zip(w).position(|(g, w)| g != w) {
                panic!(
                    "{mode:?}: resource {i} differs first at byte {at}: vulkan {:?}, soft {:?}",
                    &g[at..(at + 16).min(g.len())],
                    &w[at..(at + 16).min(w.len())]
                );
            }
        }
        // What the rings mean, apart from the soft driver: each ring ends with its second
        // pass, and `out` with every stretch of both passes where it was read.
        let last_pass = |seed| ring_out(seed)[RING..].to_vec();
        assert_eq!(got[0], last_pass(1), "{mode:?}: ring 0");
        assert_eq!(got[1], last_pass(2), "{mode:?}: ring 1");
        assert_eq!(got[2], ring_out(1), "{mode:?}: out 0");
        assert_eq!(got[3], ring_out(2), "{mode:?}: out 1");
        assert!(got[4].iter().any(|&b| b != 0), "{mode:?}: the draws wrote");
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world);
    }
}

/// Where the driver builds its lists, a Map(NO_OVERWRITE)'s Unmap records nothing (the
/// discard's copy carries the appends): a list of one discard and five appends costs the
/// hazard rule's barriers of a list of the discard alone, where a copy per append would
/// add a barrier each (a write after the discard's write), and it leaves every append in
/// the resource.
#[test]
fn driver_built_no_overwrite_unmap_records_nothing() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let desc = ResourceDesc {
        bind: BindFlags::VERTEX_BUFFER,
        ..dynamic_buffer(RING as u64)
    };
    let ring = device.create_resource(desc).unwrap();
    let want = ring_out(5)[..RING].to_vec();
    let mut dc = device.create_deferred_context().unwrap();
    let before = world.hazard_barriers();
    dc.map_discard(ring).unwrap()[..STRETCH].copy_from_slice(&want[..STRETCH]);
    dc.unmap(ring).unwrap();
    for k in 1..STRETCHES {
        let at = k * STRETCH..(k + 1) * STRETCH;
        dc.map_no_overwrite(ring).unwrap()[at.clone()].copy_from_slice(&want[at]);
        dc.unmap(ring).unwrap();
    }
    let appended = dc.finish().unwrap();
    let with_appends = world.hazard_barriers() - before;
    let before = world.hazard_barriers();
    dc.map_discard(ring).unwrap().copy_from_slice(&want);
    dc.unmap(ring).unwrap();
    let whole = dc.finish().unwrap();
    assert_eq!(
        with_appends,
        world.hazard_barriers() - before,
        "barriers of the list with appends, and of the discard alone"
    );
    ic.execute_command_list(&whole).unwrap();
    ic.map_discard(ring).unwrap().fill(0xEE);
    ic.unmap(ring).unwrap();
    ic.execute_command_list(&appended).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let a = device.object(ring).unwrap().allocation().unwrap();
    assert_eq!(world.read(a, RING).unwrap(), want);
    drop((appended, whole, dc));
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}

/// Where the driver builds its lists, a Map(NO_OVERWRITE)'s Unmap records nothing either
/// when a command read the resource since its discard (the read made the discard's copy
/// recorded): a list of one discard, a copy out of the stretch it wrote and five appends
/// costs the barriers of the discard and the copy alone, where the appends' copy, recorded
/// after the read, would add one (a write after a read). The resource ends with every
/// append, `out` with the stretch read.
#[test]
fn driver_built_no_overwrite_after_a_read_records_nothing() {
    let _turn = turn::take();
    let Some((device, mut ic, world)) = vulkan(ListMode::DriverBuilt, DeviceConfig::default())
    else {
        return;
    };
    let desc = ResourceDesc {
        bind: BindFlags::VERTEX_BUFFER,
        ..dynamic_buffer(RING as u64)
    };
    let ring = device.create_resource(desc).unwrap();
    let out = device.create_resource(buffer(STRETCH as u64)).unwrap();
    let want = ring_out(9)[..RING].to_vec();
    let mut dc = device.create_deferred_context().unwrap();
    let copy_out = SoftCommand::CopyRegion {
        dst: out,
        dst_offset: 0,
        src: ring,
        src_offset: 0,
        len: STRETCH as u64,
    };
    let discard_and_read = |dc: &mut DeferredContext<_, _>| {
        dc.map_discard(ring).unwrap()[..STRETCH].copy_from_slice(&want[..STRETCH]);
        dc.unmap(ring).unwrap();
        dc.command(copy_out).unwrap();
    };
    let before = world.hazard_barriers();
    discard_and_read(&mut dc);
    for k in 1..STRETCHES {
        let at = k * STRETCH..(k + 1) * STRETCH;
        dc.map_no_overwrite(ring).unwrap()[at.clone()].copy_from_slice(&want[at]);
        dc.unmap(ring).unwrap();
    }
    let appended = dc.finish().unwrap();
    let with_appends = world.hazard_barriers() - before;
    let before = world.hazard_barriers();
    discard_and_read(&mut dc);
    let alone = dc.finish().unwrap();
    assert_eq!(
        with_appends,
        world.hazard_barriers() - before,
        "barriers of the list with appends, and of the discard and the copy alone"
    );
    drop(alone);
    ic.execute_command_list(&appended).unwrap();
    ic.flush().unwrap();
    world.wait_gpu().unwrap();
    let read = |h: Handle<Resource>, len: usize| {
        let a = device.object(h).unwrap().allocation().unwrap();
        world.read(a, len).unwrap()
    };
    assert_eq!(read(ring, RING), want);
    assert_eq!(read(out, STRETCH), want[..STRETCH]);
    drop((appended, dc));
    ic.destroy_device().unwrap();
    drop((device, ic));
    assert_clean(world);
}
