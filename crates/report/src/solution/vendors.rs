//! Device vendors by name. The kernel names some devices' vendors by their PCI id
//! (`/sys/block/vda/device/vendor` is "0x1af4" for a virtio disk); the system's PCI
//! and USB ID databases (`pci.ids`, `usb.ids`, Debian packages pci.ids, usb.ids or
//! hwdata) name them. Parsing is pure; the caller reads the files.

use std::collections::BTreeMap;

/// Where the ID databases usually are.
pub const PCI_IDS_PATHS: [&str; 3] = [
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];
/// Where the USB ID database usually is.
pub const USB_IDS_PATHS: [&str; 3] = [
    "/usr/share/misc/usb.ids",
    "/usr/share/hwdata/usb.ids",
    "/var/lib/usbutils/usb.ids",
];

/// Vendor names by 16-bit id, from the PCI and the USB ID database.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VendorNames {
    pci: BTreeMap<u16, String>,
    usb: BTreeMap<u16, String>,
    /// Whether a PCI ID database was read (else a hex vendor's note says to install it).
    pub pci_loaded: bool,
    /// Whether a USB ID database was read.
    pub usb_loaded: bool,
}

impl VendorNames {
    /// The names of a `pci.ids` and a `usb.ids` text (either may be None: not found).
    pub fn parse(pci_ids: Option<&str>, usb_ids: Option<&str>) -> VendorNames {
        VendorNames {
            pci: pci_ids.map(vendor_lines).unwrap_or_default(),
            usb: usb_ids.map(vendor_lines).unwrap_or_default(),
            pci_loaded: pci_ids.is_some(),
            usb_loaded: usb_ids.is_some(),
        }
    }

    /// A vendor as the kernel gave it, named: "0x1af4" → "Red Hat, Inc. (PCI 1af4)";
    /// a vendor that is not a hex id ("ATA", "QEMU") as it is; an id found in neither
    /// database as the id with a note saying so.
    pub fn name(&self, vendor: &str) -> String {
        let v = vendor.trim();
        let Some(id) = hex_id(v) else {
            return v.to_string();
        };
        if let Some(n) = self.pci.get(&id) {
            return format!("{n} (PCI {id:04x})");
        }
        if let Some(n) = self.usb.get(&id) {
            return format!("{n} (USB {id:04x})");
        }
        if !self.pci_loaded && !self.usb_loaded {
            format!(
                "{v} (vendor id; no PCI or USB ID database was found: install the pci.ids \
                 or hwdata package to name it)"
            )
        } else {
            format!("{v} (vendor id not in the PCI or USB ID database)")
        }
    }
}

/// "0x1af4" or "1af4" → 0x1af4.
fn hex_id(v: &str) -> Option<u16> {
    let h = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X"))?;
    (h.len() == 4).then(|| u16::from_str_radix(h, 16).ok())?
}

/// The vendor lines of an ID database: four hex digits at the start of a line, two
/// spaces, the name (device and class lines are indented or start with "C ").
fn vendor_lines(text: &str) -> BTreeMap<u16, String> {
    text.lines()
        .filter_map(|l| {
            let (id, name) = l.split_once("  ")?;
            if id.len() != 4 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            Some((u16::from_str_radix(id, 16).ok()?, name.trim().to_string()))
        })
        .collect()
}
