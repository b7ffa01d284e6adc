//! Proof by replay (R-C3, with the trace orders of R-C1, R-H1..R-H3 and R-T1 checked on the
//! way): random command streams recorded on several deferred contexts driven from several
//! threads and executed in order must leave resource memory byte-identical to the same
//! streams run directly on an immediate context, to the same streams recorded on one
//! context whose lists are recycled, and to a plain Rust model of the commands.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::ThreadId;

use cmdlist::handle::{Query, Resource, View};
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld, TraceEvent,
};
use cmdlist::{
    BindClass, BindPoint, DeferredContext, DeferredId, Device, DeviceConfig, Handle, HandleType,
    ImmediateContext, QueryKind, ResourceDesc, Stage, Usage, ViewDesc,
};

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;
type Dc = DeferredContext<SoftDriver, SoftKernel>;

/// xorshift64: deterministic, no extra crates.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    /// An offset and a non-empty length inside `size` bytes, at most `max_len` long.
    fn span(&mut self, size: u64, max_len: u64) -> (u64, u64) {
        let offset = self.below(size);
        let len = 1 + self.below((size - offset).min(max_len));
        (offset, len)
    }
}

/// Resource sizes: small and large context-local handle classes, odd sizes.
const SIZES: [u64; 5] = [64, 200, 513, 4096, 5000];
const VIEW_TYPES: [HandleType; 3] = [
    HandleType::ShaderResourceView,
    HandleType::RenderTargetView,
    HandleType::UnorderedAccessView,
];

/// Views: (resource index, first byte, length, type).
type ViewSpec = (usize, u64, u64, HandleType);

fn view_specs(rng: &mut Rng) -> Vec<ViewSpec> {
    (0..6)
        .map(|i| {
            let r = if i < SIZES.len() {
                i
            } else {
                rng.index(SIZES.len())
            };
            let (first, len) = rng.span(SIZES[r], 700);
            (r, first, len, VIEW_TYPES[rng.index(VIEW_TYPES.len())])
        })
        .collect()
}

/// A write into mapped memory: offset and bytes.
type Patch = (usize, Vec<u8>);
/// One Map(DISCARD): the resource index and the writes.
type Mapping = (usize, Vec<Patch>);

#[derive(Clone, Debug)]
enum Step {
    Update {
        r: usize,
        offset: u64,
        data: Vec<u8>,
    },
    Copy {
        dst: usize,
        src: usize,
    },
    CopyRegion {
        dst: usize,
        dst_offset: u64,
        src: usize,
        src_offset: u64,
        len: u64,
    },
    Fill {
        r: usize,
        value: u8,
    },
    Clear {
        v: usize,
        value: u8,
    },
    /// Map(DISCARD) of one or two resources at once, sparse writes, unmapped in reverse.
    Map {
        maps: Vec<Mapping>,
    },
    Bind {
        point: BindPoint,
        v: Option<usize>,
    },
    Query,
}

const POINTS: [BindPoint; 3] = [
    BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0),
    BindPoint::new(BindClass::ShaderResource(Stage::Compute), 3),
    BindPoint::new(BindClass::RenderTarget, 0),
];

fn step(rng: &mut Rng, views: &[ViewSpec]) -> Step {
    let n = SIZES.len();
    match rng.below(100) {
        0..=27 => {
            let r = rng.index(n);
            let max_len = if rng.below(8) == 0 { 5000 } else { 64 };
            let (offset, len) = rng.span(SIZES[r], max_len);
            Step::Update {
                r,
                offset,
                data: rng.bytes(len as usize),
            }
        }
        28..=37 => Step::Copy {
            dst: rng.index(n),
            src: rng.index(n),
        },
        38..=52 => {
            let (dst, src) = (rng.index(n), rng.index(n));
            let dst_offset = rng.below(SIZES[dst]);
            let src_offset = rng.below(SIZES[src]);
            let room = (SIZES[dst] - dst_offset).min(SIZES[src] - src_offset);
            Step::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len: 1 + rng.below(room),
            }
        }
        53..=57 => Step::Fill {
            r: rng.index(n),
            value: rng.byte(),
        },
        58..=72 => Step::Clear {
            v: rng.index(views.len()),
            value: rng.byte(),
        },
        73..=89 => {
            let first = rng.index(n);
            let mut targets = vec![first];
            if rng.below(3) == 0 {
                let second = rng.index(n);
                if second != first {
                    targets.push(second);
                }
            }
            let maps = targets
                .into_iter()
                .map(|r| {
                    let patches = (0..rng.below(4))
                        .map(|_| {
                            let (offset, len) = rng.span(SIZES[r], 100);
                            (offset as usize, rng.bytes(len as usize))
                        })
                        .collect();
                    (r, patches)
                })
                .collect();
            Step::Map { maps }
        }
        90..=95 => {
            let point = POINTS[rng.index(POINTS.len())];
            let v = (rng.below(4) != 0).then(|| rng.index(views.len()));
            Step::Bind { point, v }
        }
        _ => Step::Query,
    }
}

/// The contents a Map(DISCARD) + writes + Unmap leaves: zeroes, then the patches.
fn discarded(size: u64, patches: &[Patch]) -> Vec<u8> {
    let mut bytes = vec![0; size as usize];
    for (offset, data) in patches {
        bytes[*offset..*offset + data.len()].copy_from_slice(data);
    }
    bytes
}

/// The reference: what each step does to plain byte vectors.
fn model(mem: &mut [Vec<u8>], views: &[ViewSpec], step: &Step) {
    match step {
        Step::Update { r, offset, data } => {
            mem[*r][*offset as usize..*offset as usize + data.len()].copy_from_slice(data)
        }
        Step::Copy { dst, src } => {
            let n = mem[*dst].len().min(mem[*src].len());
            let chunk = mem[*src][..n].to_vec();
            mem[*dst][..n].copy_from_slice(&chunk);
        }
        Step::CopyRegion {
            dst,
            dst_offset,
            src,
            src_offset,
            len,
        } => {
            let (d, s, n) = (*dst_offset as usize, *src_offset as usize, *len as usize);
            let chunk = mem[*src][s..s + n].to_vec();
            mem[*dst][d..d + n].copy_from_slice(&chunk);
        }
        Step::Fill { r, value } => mem[*r].fill(*value),
        Step::Clear { v, value } => {
            let (r, first, len, _) = views[*v];
            mem[r][first as usize..(first + len) as usize].fill(*value);
        }
        Step::Map { maps } => {
            for (r, patches) in maps {
                mem[*r] = discarded(SIZES[*r], patches);
            }
        }
        Step::Bind { .. } | Step::Query => {}
    }
}

/// One device with the stream's objects, created in the same order on every device.
struct Setup {
    device: Dev,
    ic: Ic,
    world: Arc<SoftWorld>,
    resources: Vec<Handle<Resource>>,
    views: Vec<Handle<View>>,
    query: Handle<Query>,
}

impl Setup {
    fn new(soft_config: SoftConfig, config: DeviceConfig, views: &[ViewSpec]) -> Self {
        let (device, ic, world) = soft::device(soft_config, config).unwrap();
        let resources: Vec<Handle<Resource>> = SIZES
            .iter()
            .map(|&byte_size| {
                device
                    .create_resource(ResourceDesc {
                        byte_size,
                        usage: Usage::Dynamic,
                        ..Default::default()
                    })
                    .unwrap()
            })
            .collect();
        let views = views
            .iter()
            .map(|&(r, first_byte, byte_len, ty)| {
                device
                    .create_view(
                        ty,
                        ViewDesc {
                            resource: resources[r],
                            first_byte,
                            byte_len,
                        },
                    )
                    .unwrap()
            })
            .collect();
        let query = device.create_query(QueryKind::Occlusion).unwrap();
        Setup {
            device,
            ic,
            world,
            resources,
            views,
            query,
        }
    }

    fn handles(&self) -> Handles {
        Handles {
            resources: self.resources.clone(),
            views: self.views.clone(),
            query: self.query,
        }
    }

    fn memory(&self) -> Vec<Vec<u8>> {
        // Each resource's current allocation: a Map(DISCARD) on the immediate context
        // renames (R-M5).
        self.resources
            .iter()
            .map(|r| {
                let allocation = self.device.object(*r).unwrap().allocation().unwrap();
                self.world.read(allocation).unwrap()
            })
            .collect()
    }

    fn finish(self) {
        let Setup { mut ic, world, .. } = self;
        world.assert_no_violations();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// The handles a recording thread needs (plain, `Send` data).
#[derive(Clone)]
struct Handles {
    resources: Vec<Handle<Resource>>,
    views: Vec<Handle<View>>,
    query: Handle<Query>,
}

impl Handles {
    fn command(&self, step: &Step) -> Option<SoftCommand> {
        let r = &self.resources;
        Some(match *step {
            Step::Copy { dst, src } => SoftCommand::Copy {
                dst: r[dst],
                src: r[src],
            },
            Step::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => SoftCommand::CopyRegion {
                dst: r[dst],
                dst_offset,
                src: r[src],
                src_offset,
                len,
            },
            Step::Fill { r: i, value } => SoftCommand::Fill { dst: r[i], value },
            Step::Clear { v, value } => SoftCommand::ClearView {
                view: self.views[v],
                value,
            },
            _ => return None,
        })
    }

    fn record(&self, dc: &mut Dc, step: &Step) {
        if let Some(command) = self.command(step) {
            dc.command(command).unwrap();
            return;
        }
        match step {
            Step::Update { r, offset, data } => {
                dc.update(self.resources[*r], *offset, data).unwrap()
            }
            Step::Map { maps } => {
                for (r, patches) in maps {
                    let mapped = dc.map_discard(self.resources[*r]).unwrap();
                    assert_eq!(mapped.len() as u64, SIZES[*r]);
                    // Its values are undefined (R-M1): the whole new contents written, as
                    // on the immediate context.
                    mapped.copy_from_slice(&discarded(SIZES[*r], patches));
                }
                for (r, _) in maps.iter().rev() {
                    dc.unmap(self.resources[*r]).unwrap();
                }
            }
            Step::Bind { point, v } => dc.bind(*point, v.map(|v| self.views[v].any())).unwrap(),
            Step::Query => {
                dc.begin_query(self.query).unwrap();
                dc.end_query(self.query).unwrap();
            }
            _ => unreachable!("commands handled above"),
        }
    }

    fn run(&self, ic: &mut Ic, step: &Step) {
        if let Some(command) = self.command(step) {
            ic.command(&command).unwrap();
            return;
        }
        match step {
            Step::Update { r, offset, data } => {
                ic.update(self.resources[*r], *offset, data).unwrap()
            }
            Step::Map { maps } => {
                for (r, patches) in maps {
                    ic.map_discard(self.resources[*r])
                        .unwrap()
                        .copy_from_slice(&discarded(SIZES[*r], patches));
                }
                for (r, _) in maps.iter().rev() {
                    ic.unmap(self.resources[*r]).unwrap();
                }
            }
            Step::Bind { point, v } => ic.bind(*point, v.map(|v| self.views[v].any())).unwrap(),
            Step::Query => {
                ic.begin_query(self.query).unwrap();
                ic.end_query(self.query).unwrap();
            }
            _ => unreachable!("commands handled above"),
        }
    }
}

/// Splits `0..len` at `parts - 1` random cut points (parts may be empty).
fn cuts(rng: &mut Rng, len: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let mut at: Vec<usize> = (1..parts).map(|_| rng.index(len + 1)).collect();
    at.sort_unstable();
    let mut ranges = Vec::new();
    let mut start = 0;
    for a in at.into_iter().chain([len]) {
        ranges.push(start..a);
        start = a;
    }
    ranges
}

/// What one recording thread reports back.
struct Recorded {
    part: usize,
    list: cmdlist::CommandList<SoftDriver, SoftKernel>,
    context: DeferredId,
    thread: ThreadId,
}

/// Checks the documented orders in the trace of one deferred context that recorded one
/// list on one thread and was then dropped there.
fn check_context_trace(
    trace: &[TraceEvent],
    context: DeferredId,
    thread: ThreadId,
    resource_of: &BTreeMap<u64, u64>,
    recycle: bool,
) {
    let ev: Vec<&TraceEvent> = trace
        .iter()
        .filter(|e| e.context == Some(context))
        .collect();
    assert!(!ev.is_empty());
    for e in &ev {
        assert_eq!(
            e.thread, thread,
            "context {context}: hook {:?} off the thread driving it",
            e.hook
        );
    }
    let pos = |pred: &dyn Fn(&TraceEvent) -> bool| ev.iter().position(|e| pred(e));
    let rpos = |pred: &dyn Fn(&TraceEvent) -> bool| ev.iter().rposition(|e| pred(e));
    let create = pos(&|e| {
        matches!(
            e.hook,
            Hook::CreateCommandList | Hook::RecycleCreateCommandList
        )
    })
    .expect("the list was created");
    let first_close = pos(&|e| e.hook == Hook::CloseLocal);
    let last_close = rpos(&|e| e.hook == Hook::CloseLocal);
    if let (Some(first_close), Some(last_close)) = (first_close, last_close) {
        assert!(
            create < first_close,
            "context {context}: CreateCommandList before the first CloseLocal"
        );
        let renew = if recycle {
            pos(&|e| e.hook == Hook::RecycleCreateDeferredContext).expect("recycled")
        } else {
            pos(&|e| e.hook == Hook::DestroyDeferredContext).expect("destroyed")
        };
        assert!(
            last_close < renew,
            "context {context}: every CloseLocal before the context is renewed"
        );
        assert!(ev[create..=last_close]
            .iter()
            .all(|e| !matches!(e.hook, Hook::OpenLocal | Hook::UseLocal)));
    }
    assert_eq!(
        ev.last().unwrap().hook,
        Hook::DestroyDeferredContext,
        "dropped last, on its thread"
    );
    // Per object: one open, before any use; one close, after every use (R-H1).
    let mut objects: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, e) in ev.iter().enumerate() {
        if matches!(e.hook, Hook::OpenLocal | Hook::UseLocal | Hook::CloseLocal) {
            objects.entry(e.object).or_default().push(i);
        }
    }
    for (object, at) in &objects {
        let hooks: Vec<Hook> = at.iter().map(|&i| ev[i].hook).collect();
        assert_eq!(
            hooks.first(),
            Some(&Hook::OpenLocal),
            "object {object}: opened before use: {hooks:?}"
        );
        assert_eq!(
            hooks.last(),
            Some(&Hook::CloseLocal),
            "object {object}: closed last: {hooks:?}"
        );
        assert_eq!(
            hooks.iter().filter(|h| **h == Hook::OpenLocal).count(),
            1,
            "object {object}: {hooks:?}"
        );
        assert_eq!(
            hooks.iter().filter(|h| **h == Hook::CloseLocal).count(),
            1,
            "object {object}: {hooks:?}"
        );
        // Views: the resource's handle opened before and closed after the view's (R-H3).
        if let Some(resource) = resource_of.get(object) {
            let r = &objects[resource];
            assert!(
                r[0] < at[0],
                "view {object} opened before its resource {resource}"
            );
            assert!(
                r[r.len() - 1] > at[at.len() - 1],
                "view {object} closed after its resource {resource}"
            );
        }
    }
}

#[test]
fn r_c3_replay_of_lists_recorded_on_many_threads_equals_direct_execution() {
    for seed in 1..=12u64 {
        let mut rng = Rng::new(seed);
        let views = view_specs(&mut rng);
        let steps: Vec<Step> = (0..320).map(|_| step(&mut rng, &views)).collect();
        let parts = 2 + rng.index(3);
        let ranges = cuts(&mut rng, steps.len(), parts);
        let recycle = seed % 2 == 1;
        let config = DeviceConfig::default().with_recycle(recycle);

        // The model.
        let mut expect: Vec<Vec<u8>> = SIZES.iter().map(|&s| vec![0; s as usize]).collect();
        for s in &steps {
            model(&mut expect, &views, s);
        }

        // (a) Split across deferred contexts, one per thread, executed in order.
        let mut a = Setup::new(SoftConfig::from_env().unwrap(), config.clone(), &views);
        let handles = a.handles();
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            for (part, range) in ranges.iter().enumerate() {
                let (tx, device, handles, steps) =
                    (tx.clone(), &a.device, &handles, &steps[range.clone()]);
                s.spawn(move || {
                    let mut dc = device.create_deferred_context().unwrap();
                    for step in steps {
                        handles.record(&mut dc, step);
                    }
                    let list = dc.finish().unwrap();
                    let context = dc.id();
                    drop(dc);
                    let thread = std::thread::current().id();
                    tx.send(Recorded {
                        part,
                        list,
                        context,
                        thread,
                    })
                    .unwrap();
                });
            }
        });
        drop(tx);
        let mut recorded: Vec<Recorded> = rx.into_iter().collect();
        recorded.sort_by_key(|r| r.part);
        assert_eq!(recorded.len(), parts);
        for r in &recorded {
            a.ic.execute_command_list(&r.list).unwrap();
            assert_eq!(a.ic.bindings().count(), 0);
        }
        a.ic.flush().unwrap();
        let trace = a.world.trace();
        let resource_of: BTreeMap<u64, u64> = a
            .views
            .iter()
            .map(|v| {
                let o = a.device.object(*v).unwrap();
                (o.id, o.resource_id)
            })
            .collect();
        // The deferred-context hooks' orders and threads (none when emulated).
        if !a.device.emulates_command_lists() {
            for r in &recorded {
                check_context_trace(&trace, r.context, r.thread, &resource_of, recycle);
            }
        }
        let threads: std::collections::BTreeSet<String> =
            recorded.iter().map(|r| format!("{:?}", r.thread)).collect();
        assert_eq!(threads.len(), parts, "each part on its own thread");

        // (b) The same stream directly on the immediate context of a second device.
        let mut b = Setup::new(SoftConfig::from_env().unwrap(), config.clone(), &views);
        let handles_b = b.handles();
        for s in &steps {
            handles_b.run(&mut b.ic, s);
        }
        b.ic.flush().unwrap();

        // (c) One context records every part in turn; each list is executed, dropped and
        // flushed before the next is finished, so list memory is recycled (R-R7).
        let mut c = Setup::new(
            SoftConfig {
                gpu: Gpu::Immediate,
                ..SoftConfig::from_env().unwrap()
            },
            config,
            &views,
        );
        let handles_c = c.handles();
        let mut dc = c.device.create_deferred_context().unwrap();
        for range in &ranges {
            for s in &steps[range.clone()] {
                handles_c.record(&mut dc, s);
            }
            let list = dc.finish().unwrap();
            c.ic.execute_command_list(&list).unwrap();
            drop(list);
            c.ic.flush().unwrap();
        }
        drop(dc);

        let (ma, mb, mc) = (a.memory(), b.memory(), c.memory());
        for i in 0..SIZES.len() {
            assert!(
                mb[i] == expect[i],
                "seed {seed}: direct execution differs from the model in resource {i}"
            );
            assert!(
                ma[i] == mb[i],
                "seed {seed}: threaded replay differs from direct execution in resource {i}"
            );
            assert!(
                mc[i] == mb[i],
                "seed {seed}: recycled replay differs from direct execution in resource {i}"
            );
        }
        drop(recorded);
        a.finish();
        b.finish();
        c.finish();
    }
}

#[test]
fn r_c3_list_with_map_discard_replays_the_same_data_every_execution() {
    let mut rng = Rng::new(0xD15C);
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default(),
    )
    .unwrap();
    let desc = |byte_size| ResourceDesc {
        byte_size,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let r = device.create_resource(desc(300)).unwrap();
    let r2 = device.create_resource(desc(64)).unwrap();
    // The resources' current bytes (a Map(DISCARD) on the immediate context renames, R-M5).
    let read = |r| world.read(device.object(r).unwrap().allocation().unwrap());
    let pattern = rng.bytes(300);
    let q = rng.bytes(64);

    let mut dc = device.create_deferred_context().unwrap();
    dc.map_discard(r).unwrap().copy_from_slice(&pattern);
    dc.unmap(r).unwrap();
    dc.update(r2, 0, &q).unwrap();
    dc.command(SoftCommand::CopyRegion {
        dst: r2,
        dst_offset: 8,
        src: r,
        src_offset: 100,
        len: 20,
    })
    .unwrap();
    let list = dc.finish().unwrap();
    let stats = list.stats();
    let mut expect2 = q.clone();
    expect2[8..28].copy_from_slice(&pattern[100..120]);

    let mut recycled_creates = 0;
    for i in 0..8 {
        // Other writes on the immediate context in between.
        ic.update(r, rng.below(200), &rng.bytes(50)).unwrap();
        ic.command(&SoftCommand::Fill {
            dst: r2,
            value: rng.byte(),
        })
        .unwrap();
        ic.map_discard(r).unwrap().copy_from_slice(&rng.bytes(300));
        ic.unmap(r).unwrap();
        // Other lists of the same context that map the same resource, executed (or not) and
        // dropped, so their memory is recycled while `list` lives on.
        let junk = rng.bytes(300);
        world.clear_trace();
        dc.map_discard(r).unwrap().copy_from_slice(&junk);
        dc.unmap(r).unwrap();
        dc.update(r2, 0, &rng.bytes(64)).unwrap();
        let other = dc.finish().unwrap();
        recycled_creates += world
            .trace()
            .iter()
            .filter(|e| e.hook == Hook::RecycleCreateCommandList)
            .count();
        if i % 2 == 0 {
            ic.execute_command_list(&other).unwrap();
            assert_eq!(read(r).unwrap(), junk);
        }
        drop(other);
        if i % 3 == 0 {
            ic.flush().unwrap();
        }
        if i == 5 {
            drop(std::mem::replace(
                &mut dc,
                device.create_deferred_context().unwrap(),
            ));
        }

        ic.execute_command_list(&list).unwrap();
        assert_eq!(
            read(r).unwrap(),
            pattern,
            "execution {i}: the Map(DISCARD) data replays"
        );
        assert_eq!(read(r2).unwrap(), expect2, "execution {i}");
        assert_eq!(list.stats(), stats);
    }
    assert!(
        recycled_creates > 0 || device.emulates_command_lists(),
        "the other lists' memory was recycled meanwhile"
    );
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}
