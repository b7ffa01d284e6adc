//! `SoftCommand::Draw`: the soft driver runs the draw's word function over the bound render
//! target, on the immediate context and from deferred contexts, in the three list modes; the
//! refusals leave the target as it was.

use cmdlist::soft::{self, draw_word, Gpu, SoftCommand, SoftConfig};
use cmdlist::{AppError, BindClass, BindPoint, DeviceConfig, HandleType, ViewDesc};

use crate::common::{allocation, app, buffer};

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);

fn le_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

#[test]
fn draw_writes_the_word_function_in_every_mode() {
    for (command_lists, driver_built) in [(false, false), (true, false), (true, true)] {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            command_lists,
            driver_built,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let mode = device.list_mode();
        let c = [3u32, 0x0101_0101, 7, 0xF0F0_0000];
        let consts = device.create_resource(buffer(20)).unwrap();
        let bytes: Vec<u8> = c.iter().flat_map(|w| w.to_le_bytes()).chain([9]).collect();
        ic.update(consts, 0, &bytes).unwrap();
        let verts = device.create_resource(buffer(14)).unwrap(); // 3 words and 2 bytes
        let v = [0x1234_5678u32, 0xFFFF_FFFF, 42];
        let vbytes: Vec<u8> = v
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .chain([1, 2])
            .collect();
        ic.update(verts, 0, &vbytes).unwrap();
        let target = device.create_resource(buffer(64)).unwrap();
        let other = device.create_resource(buffer(32)).unwrap();
        let view = device
            .create_view(
                HandleType::RenderTargetView,
                ViewDesc {
                    resource: target,
                    first_byte: 8,
                    byte_len: 24,
                },
            )
            .unwrap();
        let draw = SoftCommand::Draw {
            constants: consts,
            vertices: verts,
            point: RT0,
        };
        // Nothing bound: nothing written.
        ic.command(&draw).unwrap();
        ic.bind(RT0, Some(view.any())).unwrap();
        ic.command(&draw).unwrap();
        // From a deferred context: the whole of `other`.
        let mut dc = device.create_deferred_context().unwrap();
        dc.bind(RT0, Some(other.any())).unwrap();
        dc.command(draw).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        let got = world.read(allocation(&device, target)).unwrap();
        let want: Vec<u32> = (0..6).map(|i| draw_word(c, &v, i)).collect();
        assert_eq!(le_words(&got[8..32]), want, "{mode:?}");
        assert!(
            got[..8].iter().chain(&got[32..]).all(|&b| b == 0),
            "{mode:?}"
        );
        let got = world.read(allocation(&device, other)).unwrap();
        let want: Vec<u32> = (0..8).map(|i| draw_word(c, &v, i)).collect();
        assert_eq!(le_words(&got), want, "{mode:?}");
        drop((dc, list));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

#[test]
fn draw_refusals_write_nothing() {
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default(),
    )
    .unwrap();
    let consts = device.create_resource(buffer(16)).unwrap();
    let short = device.create_resource(buffer(12)).unwrap();
    let verts = device.create_resource(buffer(8)).unwrap();
    let target = device.create_resource(buffer(16)).unwrap();
    let odd = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: target,
                first_byte: 2,
                byte_len: 8,
            },
        )
        .unwrap();
    let draw = |constants, point| SoftCommand::Draw {
        constants,
        vertices: verts,
        point,
    };
    ic.bind(RT0, Some(target.any())).unwrap();
    assert_eq!(
        ic.command(&draw(short, RT0)),
        Err(app(AppError::OutOfRange))
    );
    ic.bind(RT0, Some(odd.any())).unwrap();
    assert_eq!(
        ic.command(&draw(consts, RT0)),
        Err(app(AppError::OutOfRange))
    );
    ic.bind(RT0, Some(consts.any())).unwrap();
    assert_eq!(
        ic.command(&draw(consts, RT0)),
        Err(app(AppError::InvalidState))
    );
    ic.flush().unwrap();
    assert!(world
        .read(allocation(&device, target))
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    ic.destroy_device().unwrap();
}
