//! The row both engines read: one `#[repr(C)]` slot per atom value, in a flat vector.
//!
//! This is the JIT's whole ABI: compiled code receives a pointer to the first slot and reads
//! `value` and `known` at fixed offsets (16 bytes per slot), so the layout is fixed here and
//! nowhere else. Out-of-range reads answer "unknown" and out-of-range writes grow the row, so no
//! caller mistake can panic.

use super::SlotId;
use crate::hir::{LabelId, ModelId};

/// One slot: a value and whether it is known.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    /// An `i64`, the bits of an `f64`, 0/1 for a bool, or a label or model id.
    pub value: u64,
    /// 1 when the value is known, 0 otherwise.
    pub known: u64,
}

impl Slot {
    pub const UNKNOWN: Slot = Slot { value: 0, known: 0 };

    pub fn known(value: u64) -> Slot {
        Slot { value, known: 1 }
    }

    pub fn is_known(self) -> bool {
        self.known != 0
    }
}

/// The slots of one request's decision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    slots: Vec<Slot>,
}

impl Row {
    /// `len` slots, all unknown.
    pub fn unknown(len: usize) -> Row {
        Row {
            slots: vec![Slot::UNKNOWN; len],
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The slot, unknown when out of range.
    pub fn get(&self, slot: SlotId) -> Slot {
        self.slots
            .get(slot.index())
            .copied()
            .unwrap_or(Slot::UNKNOWN)
    }

    pub fn set(&mut self, slot: SlotId, value: Slot) {
        let i = slot.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::UNKNOWN);
        }
        self.slots[i] = value;
    }

    pub fn clear(&mut self, slot: SlotId) {
        self.set(slot, Slot::UNKNOWN);
    }

    pub fn is_known(&self, slot: SlotId) -> bool {
        self.get(slot).is_known()
    }

    pub fn set_bool(&mut self, slot: SlotId, v: bool) {
        self.set(slot, Slot::known(u64::from(v)));
    }

    pub fn set_int(&mut self, slot: SlotId, v: i64) {
        self.set(slot, Slot::known(v as u64));
    }

    pub fn set_float(&mut self, slot: SlotId, v: f64) {
        self.set(slot, Slot::known(v.to_bits()));
    }

    pub fn set_label(&mut self, slot: SlotId, v: LabelId) {
        self.set(slot, Slot::known(u64::from(v.0)));
    }

    pub fn set_model(&mut self, slot: SlotId, v: ModelId) {
        self.set(slot, Slot::known(u64::from(v.0)));
    }

    fn known_value(&self, slot: SlotId) -> Option<u64> {
        let s = self.get(slot);
        s.is_known().then_some(s.value)
    }

    pub fn bool(&self, slot: SlotId) -> Option<bool> {
        self.known_value(slot).map(|v| v != 0)
    }

    pub fn int(&self, slot: SlotId) -> Option<i64> {
        self.known_value(slot).map(|v| v as i64)
    }

    pub fn float(&self, slot: SlotId) -> Option<f64> {
        self.known_value(slot).map(f64::from_bits)
    }

    pub fn label(&self, slot: SlotId) -> Option<LabelId> {
        self.known_value(slot)
            .map(|v| LabelId(u32::try_from(v).unwrap_or(u32::MAX)))
    }

    pub fn model(&self, slot: SlotId) -> Option<ModelId> {
        self.known_value(slot)
            .map(|v| ModelId(u32::try_from(v).unwrap_or(u32::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_layout_is_sixteen_bytes_value_first() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        assert_eq!(std::mem::offset_of!(Slot, value), 0);
        assert_eq!(std::mem::offset_of!(Slot, known), 8);
    }

    #[test]
    fn typed_round_trips() {
        let mut row = Row::unknown(5);
        row.set_bool(SlotId(0), true);
        row.set_int(SlotId(1), i64::MIN);
        row.set_float(SlotId(2), -0.0);
        row.set_label(SlotId(3), LabelId(7));
        row.set_model(SlotId(4), ModelId(2));
        assert_eq!(row.bool(SlotId(0)), Some(true));
        assert_eq!(row.int(SlotId(1)), Some(i64::MIN));
        assert!(row
            .float(SlotId(2))
            .is_some_and(|f| f == 0.0 && f.is_sign_negative()));
        assert_eq!(row.label(SlotId(3)), Some(LabelId(7)));
        assert_eq!(row.model(SlotId(4)), Some(ModelId(2)));
        row.clear(SlotId(1));
        assert_eq!(row.int(SlotId(1)), None);
    }

    #[test]
    fn out_of_range_reads_unknown_and_writes_grow() {
        let mut row = Row::unknown(1);
        assert_eq!(row.int(SlotId(9)), None);
        row.set_int(SlotId(3), 5);
        assert_eq!(row.len(), 4);
        assert_eq!(row.int(SlotId(3)), Some(5));
        assert!(!row.is_known(SlotId(2)));
    }
}
