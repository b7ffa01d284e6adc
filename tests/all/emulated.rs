//! Drivers without command lists (caps without `COMMANDLISTS`): the engine emulates deferred
//! contexts and command lists, as the D3D11 runtime does for such drivers. Recording,
//! Finish, Abandon, out-of-memory removal, nested execution and the lists' ends call no
//! deferred-context or command-list hook; lists replay through the immediate context's
//! operations alone, each starting from a clear-state and followed by one (R-C3). The whole
//! test suite also runs this way (`CMDLIST_SOFT_EMULATED=1 cargo test`).

use cmdlist::soft::{self, Gpu, Hook, SoftCommand, SoftConfig};
use cmdlist::{BindClass, BindPoint, DeviceConfig, QueryKind, ThreadingCaps};

use crate::common::{allocation, buffer, dynamic_buffer};

const VB0: BindPoint = BindPoint::new(BindClass::VertexBuffer, 0);

#[test]
fn r_c3_emulated_deferred_contexts_call_no_deferred_context_hook() {
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            command_lists: false,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default().with_deferred_budget(4096),
    )
    .unwrap();
    assert!(device.emulates_command_lists());
    assert!(!device.caps().contains(ThreadingCaps::COMMANDLISTS));
    let (a, b) = (
        device.create_resource(buffer(16)).unwrap(),
        device.create_resource(buffer(16)).unwrap(),
    );
    let d = device.create_resource(dynamic_buffer(16)).unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    let v = device
        .create_view(
            cmdlist::HandleType::ShaderResourceView,
            cmdlist::ViewDesc {
                resource: a,
                first_byte: 0,
                byte_len: 8,
            },
        )
        .unwrap();
    let mut dc1 = device.create_deferred_context().unwrap();
    let mut dc2 = device.create_deferred_context().unwrap();
    for round in 0..3u8 {
        // A recording of every kind of operation, abandoned once.
        dc1.bind(VB0, Some(v.any())).unwrap();
        dc1.update(a, 0, &[round + 1; 16]).unwrap();
        dc1.map_discard(d).unwrap().fill(round + 2);
        dc1.begin_query(q).unwrap();
        dc1.abandon().unwrap();
        dc1.update(a, 0, &[round + 1; 16]).unwrap();
        dc1.map_discard(d).unwrap().fill(round + 2);
        dc1.unmap(d).unwrap();
        dc1.begin_query(q).unwrap();
        let inner = dc1.finish().unwrap();
        // Nested, with the inner list dropped first.
        dc2.bind(VB0, Some(v.any())).unwrap();
        dc2.execute_command_list(&inner).unwrap();
        assert_eq!(dc2.binding(VB0), None);
        dc2.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
        let outer = dc2.finish().unwrap();
        drop(inner);
        // Out of memory: removed locally, then recording again.
        dc1.update(b, 0, &[0; 16]).unwrap();
        let _ = dc1.update(a, 0, &vec![0; 8192]);
        assert!(dc1.is_removed());
        assert!(dc1.finish().is_err());
        ic.execute_command_list(&outer).unwrap();
        ic.flush().unwrap();
        assert_eq!(
            world.read(allocation(&device, b)).unwrap(),
            vec![round + 1; 16]
        );
        assert_eq!(
            world.read(allocation(&device, d)).unwrap(),
            vec![round + 2; 16]
        );
        assert!(ic.query_signaled(q).unwrap());
        std::thread::spawn(move || drop(outer)).join().unwrap();
    }
    assert!(
        dc2.stats().recycled >= 1,
        "list memory recycled without hooks"
    );
    drop((dc1, dc2));
    ic.destroy_device().unwrap();
    let trace = world.trace();
    let called: Vec<Hook> = trace
        .iter()
        .map(|e| e.hook)
        .filter(|h| h.needs_command_lists())
        .collect();
    assert!(called.is_empty(), "{called:?}");
    assert!(trace.iter().any(|e| e.hook == Hook::Execute));
    world.assert_clean();
}
