//! The Map types an application asks for (`D3D11_MAP`), R-M1.

/// What a Map asks for (`D3D11_MAP`): which contexts take it and what it hands out are
/// R-M1's to say. A C shim passes the DDI's map type through [`MapType::from_ddi`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapType {
    /// `D3D11_MAP_READ`: a staging resource's contents, to read.
    Read,
    /// `D3D11_MAP_WRITE`: a staging resource's contents, to write.
    Write,
    /// `D3D11_MAP_READ_WRITE`: a staging resource's contents, to read and write.
    ReadWrite,
    /// `D3D11_MAP_WRITE_DISCARD`: new contents for a dynamic resource (R-M1).
    WriteDiscard,
    /// `D3D11_MAP_WRITE_NO_OVERWRITE`: a dynamic buffer's contents, kept, to write where
    /// the GPU does not read (R-M2, R-M3).
    WriteNoOverwrite,
}

bitflags::bitflags! {
    /// A Map's flags (`D3D11_MAP_FLAG`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MapFlags: u32 {
        /// `D3D11_MAP_FLAG_DO_NOT_WAIT`: a staging Map the GPU still uses answers
        /// [`crate::Error::WasStillDrawing`] instead of waiting (R-M4). Ignored with
        /// WRITE_DISCARD and WRITE_NO_OVERWRITE, which never wait.
        const DO_NOT_WAIT = 0x0010_0000;
    }
}

impl MapType {
    /// The type of the DDI's (and the API's) map-type value: `D3D10_DDI_MAP_READ` (1) to
    /// `D3D10_DDI_MAP_WRITE_NOOVERWRITE` (5); `None` for any other value.
    pub fn from_ddi(value: u32) -> Option<MapType> {
        Some(match value {
            1 => MapType::Read,
            2 => MapType::Write,
            3 => MapType::ReadWrite,
            4 => MapType::WriteDiscard,
            5 => MapType::WriteNoOverwrite,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::MapType;

    /// The DDI's values, and nothing else.
    #[test]
    fn r_m1_map_types_from_the_ddi() {
        assert_eq!(MapType::from_ddi(0), None);
        assert_eq!(MapType::from_ddi(1), Some(MapType::Read));
        assert_eq!(MapType::from_ddi(4), Some(MapType::WriteDiscard));
        assert_eq!(MapType::from_ddi(5), Some(MapType::WriteNoOverwrite));
        assert_eq!(MapType::from_ddi(6), None);
    }
}
