//! The component's interface as wasmtime generates it, and the conversions between its types and
//! the API's (`hindsight_types`). Nothing generated leaves this module.

use hindsight_types as api;
pub(crate) use hindsight_types::wit_map::WitInto;

wasmtime::component::bindgen!({
    path: "wit/memory.wit",
    world: "memory",
});

pub(crate) use self::hindsight::memory::{llm, store, types};
pub(crate) use exports::hindsight::memory::api as guest;

hindsight_types::wit_map!(types, llm, store);

/// A task update as the component takes it; a step without a time gets `now` (the bank's time,
/// which `Bank::at` may have set).
pub(crate) fn task_update(mut update: api::TaskUpdate, now: api::Timestamp) -> types::TaskUpdate {
    if let api::TaskUpdate::Step(s) = &mut update {
        s.at.get_or_insert(now);
    }
    update.wit_into()
}

impl From<types::Error> for crate::Error {
    fn from(e: types::Error) -> Self {
        e.wit_into()
    }
}
