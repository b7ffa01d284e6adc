//! Command lists executed on deferred contexts (nested lists, R-C3): replayed in place with
//! the clear-state their execute recorded, at any depth; kept alive, executable and
//! unrecycled while an outer list can still run (R-R4, R-R5, R-R8, R-H2); checked for
//! conflicting maps and queries at every depth (R-C4).

use std::sync::Arc;

use cmdlist::handle::{Query, Resource};
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld,
};
use cmdlist::{
    AppError, BindClass, BindPoint, Clock, DeviceConfig, Error, Handle, ListMode, QueryKind,
};

use crate::common::{allocation, buffer, count, dynamic_buffer, events_of, id_of, native};

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);

fn setup() -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    setup_with(SoftConfig::from_env().unwrap())
}

fn setup_with(config: SoftConfig) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            ..config
        },
        DeviceConfig::default().with_list_clock(Clock::Submitted),
    )
    .unwrap()
}

/// A device whose lists replay at most `limit` operations.
fn with_replay_limit(limit: u64) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    };
    soft::device(config, DeviceConfig::default().with_replay_limit(limit)).unwrap()
}

fn bytes(world: &SoftWorld, device: &SoftDevice, r: Handle<Resource>) -> Vec<u8> {
    world.read(allocation(device, r)).unwrap()
}

/// The inner list's operations replay where the outer list executed it: between the outer
/// list's operations before and after the execute.
#[test]
fn r_c3_a_nested_list_replays_in_place() {
    let (device, mut ic, world) = setup();
    let (a, b) = (
        device.create_resource(buffer(16)).unwrap(),
        device.create_resource(buffer(16)).unwrap(),
    );
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    dc1.command(SoftCommand::Fill { dst: a, value: 1 }).unwrap();
    let inner = dc1.finish().unwrap();
    dc2.command(SoftCommand::Fill { dst: a, value: 9 }).unwrap();
    dc2.execute_command_list(&inner).unwrap();
    dc2.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    dc2.update(a, 0, &[7]).unwrap();
    let outer = dc2.finish().unwrap();
    assert_eq!(
        outer.stats().operations,
        4,
        "one operation for the whole inner list"
    );
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        bytes(&world, &device, b),
        vec![1; 16],
        "the inner list ran before the copy"
    );
    let mut a_bytes = vec![1; 16];
    a_bytes[0] = 7;
    assert_eq!(bytes(&world, &device, a), a_bytes);
    drop((inner, outer, dc1, dc2));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// The driver hears of the execute on the deferred context's thread while the state-refresh
/// queries answer the context's bindings; after it nothing is bound on the context, and the
/// replay carries that clear-state: a bind before the execute does not reach past it, a
/// bind after it is not lost, and the inner list inherits nothing.
#[test]
fn r_c3_executing_a_list_clears_the_deferred_context_and_the_replay_carries_it() {
    let (device, mut ic, world) = setup();
    let [a, b, c] = [(); 3].map(|()| device.create_resource(buffer(8)).unwrap());
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    // The inner list draws before and after binding its own target.
    dc1.command(SoftCommand::FillBound {
        point: RT0,
        value: 4,
    })
    .unwrap();
    dc1.bind(RT0, Some(c.any())).unwrap();
    dc1.command(SoftCommand::FillBound {
        point: RT0,
        value: 5,
    })
    .unwrap();
    let inner = dc1.finish().unwrap();

    dc2.bind(RT0, Some(a.any())).unwrap();
    dc2.command(SoftCommand::FillBound {
        point: RT0,
        value: 1,
    })
    .unwrap();
    dc2.execute_command_list(&inner).unwrap();
    assert_eq!(dc2.binding(RT0), None, "nothing bound after the execute");
    assert_eq!(dc2.bindings().count(), 0);
    let during = events_of(&world, dc2.id());
    let execute = during
        .iter()
        .find(|e| e.hook == Hook::ExecuteCommandListDeferred);
    if device.emulates_command_lists() {
        assert!(
            execute.is_none(),
            "an emulating engine calls no deferred-context hook"
        );
    } else {
        let execute = execute.expect("the driver hears of the execute on the deferred context");
        assert_eq!(
            execute.state, 1,
            "during the call, the context's binding is answered"
        );
        assert_eq!(execute.thread, std::thread::current().id());
    }
    // Nothing bound: this draw writes nothing.
    dc2.command(SoftCommand::FillBound {
        point: RT0,
        value: 7,
    })
    .unwrap();
    dc2.bind(RT0, Some(b.any())).unwrap();
    dc2.command(SoftCommand::FillBound {
        point: RT0,
        value: 9,
    })
    .unwrap();
    let outer = dc2.finish().unwrap();

    ic.bind(RT0, Some(c.any())).unwrap();
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        bytes(&world, &device, a),
        vec![1; 8],
        "the earlier bind ended at the execute"
    );
    assert_eq!(
        bytes(&world, &device, b),
        vec![9; 8],
        "the later bind was replayed"
    );
    assert_eq!(
        bytes(&world, &device, c),
        vec![5; 8],
        "the inner list inherited nothing"
    );
    assert_eq!(ic.bindings().count(), 0);
    drop((inner, outer, dc1, dc2));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// The application drops the inner list before the outer one runs: the outer list keeps it
/// executable (no destroy hook yet, R-R8) and keeps its objects alive (R-H2), also an object
/// the application destroyed; dropping the outer list ends the inner one.
#[test]
fn r_r8_an_inner_list_dropped_first_lives_while_an_outer_list_holds_it() {
    let (device, mut ic, world) = setup();
    let (a, b) = (
        device.create_resource(buffer(8)).unwrap(),
        device.create_resource(buffer(8)).unwrap(),
    );
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    dc1.update(a, 0, &[3; 8]).unwrap();
    let inner = dc1.finish().unwrap();
    dc2.execute_command_list(&inner).unwrap();
    dc2.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    let outer = dc2.finish().unwrap();
    // The driver's id of the inner list (none when emulated: no driver side).
    let inner_id = world
        .trace()
        .into_iter()
        .find(|e| e.hook == Hook::CreateCommandList && e.context == Some(dc1.id()))
        .map(|created| created.object);
    assert_eq!(inner_id.is_none(), device.emulates_command_lists());
    let a_id = id_of(&device, a);
    drop(inner);
    device.destroy(a).unwrap();
    ic.flush().unwrap();
    let ended = |world: &SoftWorld, id: u64| {
        world.trace().iter().any(|e| {
            e.object == id
                && matches!(
                    e.hook,
                    Hook::RecycleDestroyCommandList
                        | Hook::DestroyCommandList
                        | Hook::DestroyObject
                )
        })
    };
    if let Some(inner_id) = inner_id {
        assert!(
            !ended(&world, inner_id),
            "the outer list still holds the inner one"
        );
    }
    assert!(
        !ended(&world, a_id),
        "the inner list still holds its object"
    );
    for _ in 0..2 {
        ic.update(b, 0, &[0; 8]).unwrap();
        ic.execute_command_list(&outer).unwrap();
        ic.flush().unwrap();
        assert_eq!(bytes(&world, &device, b), vec![3; 8]);
    }
    drop(outer);
    ic.flush().unwrap();
    if let Some(inner_id) = inner_id {
        assert!(
            ended(&world, inner_id),
            "the outer list's drop ended the inner one"
        );
    }
    assert!(ended(&world, a_id), "and released its object");
    drop((dc1, dc2));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// One inner list executed twice in one outer list replays twice, each time in place.
#[test]
fn r_c3_the_same_inner_list_twice_in_one_outer_list() {
    let (device, mut ic, world) = setup();
    let [a, b, c] = [(); 3].map(|()| device.create_resource(buffer(8)).unwrap());
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    dc1.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    let inner = dc1.finish().unwrap();
    dc2.update(a, 0, &[1; 8]).unwrap();
    dc2.execute_command_list(&inner).unwrap();
    dc2.command(SoftCommand::Copy { dst: c, src: b }).unwrap();
    dc2.update(a, 0, &[2; 8]).unwrap();
    dc2.execute_command_list(&inner).unwrap();
    let outer = dc2.finish().unwrap();
    drop(inner);
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        bytes(&world, &device, c),
        vec![1; 8],
        "the first replay, in its place"
    );
    assert_eq!(bytes(&world, &device, b), vec![2; 8], "the second one");
    let executes = count(&world.trace(), Hook::ExecuteCommandList);
    // Replayed, the inner list enters through its own CommandListExecute twice; built by the
    // driver, the outer list's execute runs the chained inner one itself.
    let expected = match device.list_mode() {
        ListMode::Emulated => 0,
        ListMode::Replayed => 3,
        ListMode::DriverBuilt => 1,
    };
    assert_eq!(executes, expected, "the outer list and the inner one twice");
    drop((outer, dc1, dc2));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Lists nested thousands deep (each level executes the one below, copies what it left,
/// then writes its own number)
/// replay every level in order, and the chain, held only by its outermost list, ends
/// without recursion when that list goes.
#[test]
fn r_c3_deep_nesting_replays_every_level_and_ends_without_recursion() {
    let depth: u32 = if cfg!(miri) { 20 } else { 20_000 };
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            trace: false,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default(),
    )
    .unwrap();
    let (a, b) = (
        device.create_resource(buffer(4)).unwrap(),
        device.create_resource(buffer(4)).unwrap(),
    );
    let mut dc = device.create_deferred_context().unwrap();
    dc.update(a, 0, &0u32.to_le_bytes()).unwrap();
    let mut list = dc.finish().unwrap();
    for level in 1..depth {
        dc.execute_command_list(&list).unwrap();
        dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
        dc.update(a, 0, &level.to_le_bytes()).unwrap();
        list = dc.finish().unwrap(); // the level below is now held by this one only
    }
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    assert_eq!(bytes(&world, &device, a), (depth - 1).to_le_bytes());
    assert_eq!(bytes(&world, &device, b), (depth - 2).to_le_bytes());
    // Ends all levels on this thread's stack, whatever their number.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || drop(list))
        .unwrap()
        .join()
        .unwrap();
    ic.flush().unwrap();
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_no_violations();
}

/// The inner list's memory is not recycled while the buffer that executed the outer one
/// (and with it the inner one) may read it: its context's next Finish leaves it waiting
/// until that buffer was submitted (R-R5, list clock `Submitted`).
#[test]
fn r_r5_an_inner_list_waits_for_the_buffer_that_executed_its_outer_list() {
    let (device, mut ic, world) = setup_with(native());
    let a = device.create_resource(buffer(8)).unwrap();
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    dc1.update(a, 0, &[1; 8]).unwrap();
    let inner = dc1.finish().unwrap();
    dc2.execute_command_list(&inner).unwrap();
    let outer = dc2.finish().unwrap();
    drop(inner);
    ic.execute_command_list(&outer).unwrap();
    drop(outer); // both lists end while the buffer that executed them is open
    dc1.update(a, 0, &[2; 8]).unwrap();
    let next = dc1.finish().unwrap();
    assert_eq!(
        dc1.stats().recycled,
        0,
        "the inner list's buffer is not submitted yet"
    );
    assert_eq!(dc1.stats().waiting_lists, 1);
    ic.flush().unwrap();
    dc1.update(a, 0, &[3; 8]).unwrap();
    let last = dc1.finish().unwrap();
    assert_eq!(
        dc1.stats().recycled,
        1,
        "recycled once the buffer was submitted"
    );
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop((next, last, dc1, dc2));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-C4 reaches into nested lists: a Map or a query recorded by an inner list conflicts
/// with the executing context's open Map or begun query, on the immediate context and on a
/// deferred one; a list of another device is refused (R-R8).
#[test]
fn r_c4_nested_maps_and_queries_conflict_at_every_depth() {
    let (device, mut ic, world) = setup();
    let d = device.create_resource(dynamic_buffer(16)).unwrap();
    let q: Handle<Query> = device.create_query(QueryKind::Event).unwrap();
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    let mut dc3 = device.create_deferred_context().unwrap();
    dc1.map_discard(d).unwrap().fill(1);
    dc1.unmap(d).unwrap();
    dc1.begin_query(q).unwrap();
    let inner = dc1.finish().unwrap();
    dc2.execute_command_list(&inner).unwrap();
    let middle = dc2.finish().unwrap();
    dc3.execute_command_list(&middle).unwrap();
    let outer = dc3.finish().unwrap();

    ic.map_discard(d).unwrap();
    let conflict = Err(Error::Application(AppError::MapConflict));
    assert_eq!(ic.execute_command_list(&outer), conflict);
    dc3.map_discard(d).unwrap();
    assert_eq!(dc3.execute_command_list(&middle), conflict);
    dc3.abandon().unwrap();
    ic.unmap(d).unwrap();
    ic.begin_query(q).unwrap();
    let conflict = Err(Error::Application(AppError::QueryConflict));
    assert_eq!(ic.execute_command_list(&outer), conflict);
    dc3.begin_query(q).unwrap();
    assert_eq!(dc3.execute_command_list(&middle), conflict);
    dc3.abandon().unwrap();
    ic.end_query(q).unwrap();
    ic.execute_command_list(&outer).unwrap();

    let (other, mut other_ic, other_world) = setup();
    let mut foreign = other.create_deferred_context().unwrap();
    assert_eq!(
        foreign.execute_command_list(&inner),
        Err(Error::Application(AppError::CommandListNotExecutable))
    );
    drop(foreign);
    other_ic.destroy_device().unwrap();
    other_world.assert_clean();
    drop((inner, middle, outer, dc1, dc2, dc3));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// What a nested execute costs the outer list (R-C3: O(1), no copy of the inner list): one
/// recorded operation and one owner of the inner list, whatever the inner list holds. The
/// figure BENCHMARKS.md records: `cargo test --release --test all
/// r_c3_a_nested_execute_costs_one_operation -- --nocapture`.
#[test]
fn r_c3_a_nested_execute_costs_one_operation_whatever_the_inner_list_holds() {
    const EXECUTES: usize = 1024;
    let (device, mut ic, world) = setup();
    let a = device.create_resource(buffer(64)).unwrap();
    // Each list from a context of its own, so that none is made from recycled memory.
    let fresh = |record: &dyn Fn(&mut cmdlist::DeferredContext<_, _>)| {
        let mut dc = device.create_deferred_context().unwrap();
        record(&mut dc);
        dc.finish().unwrap()
    };
    let empty = fresh(&|_| {}).stats().retained_bytes;
    let mut per_execute = Vec::new();
    for inner_ops in [1, 1000] {
        let inner = fresh(&|dc| {
            for i in 0..inner_ops {
                dc.update(a, 0, &[i as u8; 64]).unwrap();
            }
        });
        let outer = fresh(&|dc| {
            for _ in 0..EXECUTES {
                dc.execute_command_list(&inner).unwrap();
            }
        });
        let stats = outer.stats();
        assert_eq!((stats.operations, stats.payload_bytes), (EXECUTES, 0));
        let bytes = (stats.retained_bytes - empty) as f64 / EXECUTES as f64;
        println!(
            "inner list of {inner_ops} operations ({} bytes): {bytes} bytes per nested execute",
            inner.stats().retained_bytes
        );
        per_execute.push(bytes);
        ic.execute_command_list(&outer).unwrap();
        ic.flush().unwrap();
    }
    assert_eq!(
        per_execute[0], per_execute[1],
        "the inner list's size does not matter"
    );
    let bound = cmdlist::OPERATION_BYTES + core::mem::size_of::<usize>();
    assert!(
        per_execute[0] <= bound as f64,
        "{} bytes per nested execute, more than an operation and a pointer",
        per_execute[0]
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Every recorded operation counts against the replay limit, not only the execution of a
/// list: a list never replays more than `DeviceConfig::replay_limit` operations, which its
/// `ListStats::replayed_operations` reports (R-E3: the operation past it runs out of memory).
#[test]
fn r_e3_every_recorded_operation_counts_against_the_replay_limit() {
    const LIMIT: u64 = 2;
    let (device, mut ic, world) = with_replay_limit(LIMIT);
    let a = device.create_resource(dynamic_buffer(4)).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.update(a, 0, &[1; 4]).unwrap();
    dc.command(SoftCommand::Fill { dst: a, value: 2 }).unwrap();
    let list = dc.finish().unwrap();
    assert_eq!(list.stats().replayed_operations, LIMIT);
    let results: Vec<_> = (0..5)
        .map(|_| dc.command(SoftCommand::Fill { dst: a, value: 3 }))
        .collect();
    let oom = Err(Error::OutOfMemory);
    assert_eq!(
        results,
        [Ok(()), Ok(()), oom, Ok(()), Ok(())],
        "the third operation runs out of memory; the removed context accepts the rest"
    );
    assert!(dc.is_removed());
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    // A Map counts too (its Unmap is its operation)...
    dc.update(a, 0, &[4; 4]).unwrap();
    dc.update(a, 0, &[5; 4]).unwrap();
    assert_eq!(
        dc.map_discard(a).map(|b| b.len()),
        Ok(4),
        "removed: scratch memory"
    );
    assert!(dc.is_removed());
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    // ...from the Map on: an open Map owes its Unmap, so no other operation takes its room.
    dc.update(a, 0, &[6; 4]).unwrap();
    dc.map_discard(a).unwrap();
    assert_eq!(
        dc.command(SoftCommand::Fill { dst: a, value: 7 }),
        Err(Error::OutOfMemory)
    );
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    assert_eq!(bytes(&world, &device, a), vec![2; 4]);
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Lists that each execute the one below twice replay exponentially many operations from a
/// few recorded ones: the execute that would take a recording past
/// `DeviceConfig::replay_limit` runs out of memory (R-E3: the context is removed locally, its
/// Finish fails once, then it records again), so no execute on the immediate context can be
/// made to run for ages.
#[test]
fn r_e3_a_recording_that_would_replay_too_many_operations_runs_out_of_memory() {
    assert_eq!(DeviceConfig::default().replay_limit, 1 << 22);
    const LIMIT: u64 = 1 << 20;
    let (device, mut ic, world) = with_replay_limit(LIMIT);
    let a = device.create_resource(buffer(4)).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.update(a, 0, &[1; 4]).unwrap();
    let mut list = dc.finish().unwrap();
    let mut levels = 0;
    loop {
        let below = list.stats().replayed_operations;
        assert!(below <= LIMIT);
        let first = dc.execute_command_list(&list);
        let second = dc.execute_command_list(&list);
        let expected = 2 + 2 * below;
        if expected > LIMIT {
            assert_eq!((first, second), (Ok(()), Err(Error::OutOfMemory)));
            assert!(dc.is_removed());
            assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
            break;
        }
        assert_eq!((first, second), (Ok(()), Ok(())));
        list = dc.finish().unwrap();
        assert_eq!(list.stats().replayed_operations, expected);
        levels += 1;
    }
    assert!(levels > 15, "{levels} levels");
    // The context records again; a shallow list still runs.
    dc.update(a, 0, &[2; 4]).unwrap();
    let small = dc.finish().unwrap();
    ic.execute_command_list(&small).unwrap();
    ic.flush().unwrap();
    assert_eq!(bytes(&world, &device, a), vec![2; 4]);
    drop((list, small, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-C4 at every depth whatever order a list's Maps were recorded in: a list maps `d3`, then
/// `d1`, and executes a list that maps `d2` (its set noted out of order, sorted at Finish);
/// with any of the three mapped on the immediate context, executing it is a map conflict and
/// runs nothing; with none mapped, it runs.
#[test]
fn r_c4_a_lists_maps_conflict_whatever_order_they_were_recorded_in() {
    let (device, mut ic, _world) = setup();
    let [d1, d2, d3] = [(); 3].map(|()| device.create_resource(dynamic_buffer(16)).unwrap());
    let mut dc = device.create_deferred_context().unwrap();
    dc.map_discard(d2).unwrap().fill(2);
    dc.unmap(d2).unwrap();
    let inner = dc.finish().unwrap();
    for d in [d3, d1] {
        dc.map_discard(d).unwrap().fill(1);
        dc.unmap(d).unwrap();
    }
    dc.execute_command_list(&inner).unwrap();
    let outer = dc.finish().unwrap();
    for mapped in [d1, d2, d3] {
        ic.map_discard(mapped).unwrap();
        assert_eq!(
            ic.execute_command_list(&outer),
            Err(Error::Application(AppError::MapConflict)),
            "{mapped:?} mapped on the immediate context"
        );
        ic.unmap(mapped).unwrap();
    }
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
}

/// The same for queries: a list begins and ends `q3`, then `q1`, and executes a list that
/// begins and ends `q2`; with any of the three begun on the immediate context, executing it
/// is a query conflict and runs nothing (R-C4).
#[test]
fn r_c4_a_lists_queries_conflict_whatever_order_they_were_recorded_in() {
    let (device, mut ic, _world) = setup();
    let [q1, q2, q3] = [(); 3].map(|()| device.create_query(QueryKind::Occlusion).unwrap());
    let mut dc = device.create_deferred_context().unwrap();
    dc.begin_query(q2).unwrap();
    dc.end_query(q2).unwrap();
    let inner = dc.finish().unwrap();
    for q in [q3, q1] {
        dc.begin_query(q).unwrap();
        dc.end_query(q).unwrap();
    }
    dc.execute_command_list(&inner).unwrap();
    let outer = dc.finish().unwrap();
    for begun in [q1, q2, q3] {
        ic.begin_query(begun).unwrap();
        assert_eq!(
            ic.execute_command_list(&outer),
            Err(Error::Application(AppError::QueryConflict)),
            "{begun:?} begun on the immediate context"
        );
        ic.end_query(begun).unwrap();
    }
    ic.execute_command_list(&outer).unwrap();
    ic.flush().unwrap();
}
