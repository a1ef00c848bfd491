//! The component boundary: the world's exports forwarded to the engine, its imports lent to it.
//! The types cross through the one table in `hindsight_types::wit_map`.

use std::cell::RefCell;
use std::rc::Rc;

wit_bindgen::generate!({
    path: "../../wit/memory.wit",
    world: "memory",
});

use exports::hindsight::memory::api as wit;
use hindsight::memory::{llm, store, types};
use hindsight_engine::Error;
use hindsight_types::time::now as wall_clock;
use hindsight_types::wit_map::WitInto;

hindsight_types::wit_map!(types, llm, store);

struct Component;

export!(Component);

impl wit::Guest for Component {
    type Engine = EngineResource;
    type Bank = BankResource;
}

pub struct EngineResource(hindsight_engine::Engine);

pub struct BankResource(RefCell<hindsight_engine::Bank>);

/// The host's store, reached through the `store` import.
struct HostStore;

impl hindsight_types::Store for HostStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, hindsight_types::StoreError> {
        store::get(key).map_err(WitInto::wit_into)
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, hindsight_types::StoreError> {
        store::scan(prefix, start_after, limit).map_err(WitInto::wit_into)
    }

    fn commit(&self, ops: Vec<hindsight_types::Op>) -> Result<(), hindsight_types::StoreError> {
        let ops: Vec<store::Op> = ops.wit_into();
        store::commit(&ops).map_err(WitInto::wit_into)
    }
}

/// The host's language model, reached through the `llm` import.
struct HostLlm;

impl hindsight_types::Llm for HostLlm {
    fn complete(
        &self,
        r: &hindsight_types::LlmRequest,
    ) -> Result<hindsight_types::LlmResponse, hindsight_types::llm::LlmError> {
        llm::complete(&r.clone().wit_into()).map(WitInto::wit_into).map_err(WitInto::wit_into)
    }
}

fn now_or_clock(now: Option<i64>) -> i64 {
    now.unwrap_or_else(wall_clock)
}

impl wit::GuestEngine for EngineResource {
    fn create(model: Vec<u8>, tokenizer: Vec<u8>, settings: String) -> Result<wit::Engine, types::Error> {
        let engine = hindsight_engine::Engine::new(&model, &tokenizer, &settings)?.with_llm(Rc::new(HostLlm));
        Ok(wit::Engine::new(EngineResource(engine)))
    }

    fn model_id(&self) -> String {
        self.0.model_id().to_string()
    }

    fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, types::Error> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(self.0.embed(&refs)?)
    }

    fn embed_keyed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, types::Error> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(self.0.embed_keyed(&refs)?)
    }

    fn banks(&self) -> Result<Vec<String>, types::Error> {
        Ok(self.0.banks(&HostStore)?)
    }

    fn open_bank(&self, id: String) -> Result<wit::Bank, types::Error> {
        let bank = self.0.open_bank(&id, Box::new(HostStore))?;
        Ok(wit::Bank::new(BankResource(RefCell::new(bank))))
    }
}

impl wit::GuestBank for BankResource {
    fn id(&self) -> String {
        self.0.borrow().id().to_string()
    }

    fn retain(
        &self,
        items: Vec<types::NewMemory>,
        now: Option<i64>,
    ) -> Result<Vec<types::RetainOutcome>, types::Error> {
        let now = now_or_clock(now);
        Ok(self.0.borrow_mut().metered("retain", |b| b.retain(items.wit_into(), now))?.wit_into())
    }

    fn recall(&self, q: types::RecallQuery) -> Result<types::RecallResult, types::Error> {
        Ok(self.0.borrow_mut().metered("recall", |b| b.recall(q.wit_into()))?.wit_into())
    }

    fn recall_with(
        &self,
        others: Vec<wit::BankBorrow<'_>>,
        q: types::RecallQuery,
    ) -> Result<types::RecallResult, types::Error> {
        let mut guards = Vec::with_capacity(others.len() + 1);
        for bank in std::iter::once(self).chain(others.iter().map(|b| b.get::<BankResource>())) {
            // A bank listed twice is already borrowed.
            let guard =
                bank.0.try_borrow_mut().map_err(|_| Error::invalid("banks", "a bank is listed twice"))?;
            guards.push(guard);
        }
        let mut banks: Vec<&mut hindsight_engine::Bank> = guards.iter_mut().map(|g| &mut **g).collect();
        banks[0].begin_metered("recall");
        let result = hindsight_engine::recall_across(&mut banks, q.wit_into());
        banks[0].end_metered(result.is_ok());
        Ok(result?.wit_into())
    }

    fn get(&self, id: String) -> Result<types::Memory, types::Error> {
        Ok(self.0.borrow_mut().get(&id)?.wit_into())
    }

    fn forget(&self, id: String, now: Option<i64>) -> Result<(), types::Error> {
        Ok(self.0.borrow_mut().forget(&id, now_or_clock(now))?)
    }

    fn erase(&self, id: String, now: Option<i64>) -> Result<types::Erasure, types::Error> {
        Ok(self.0.borrow_mut().erase(&id, now_or_clock(now))?.wit_into())
    }

    fn delete_bank(&self) -> Result<u32, types::Error> {
        Ok(self.0.borrow_mut().delete_bank()?)
    }

    fn restore(&self, id: String, now: Option<i64>) -> Result<types::Memory, types::Error> {
        Ok(self.0.borrow_mut().restore(&id, now_or_clock(now))?.wit_into())
    }

    fn unsupersede(&self, id: String, now: Option<i64>) -> Result<types::Memory, types::Error> {
        Ok(self.0.borrow_mut().unsupersede(&id, now_or_clock(now))?.wit_into())
    }

    fn stats(&self) -> Result<types::Stats, types::Error> {
        Ok(self.0.borrow_mut().stats()?.wit_into())
    }

    fn last_usage(&self) -> types::Usage {
        self.0.borrow().last_usage().wit_into()
    }

    fn feedback(
        &self,
        ids: Vec<String>,
        outcome: types::FeedbackOutcome,
        now: Option<i64>,
    ) -> Result<Vec<types::Memory>, types::Error> {
        Ok(self.0.borrow_mut().feedback(&ids, outcome.wit_into(), now_or_clock(now))?.wit_into())
    }

    fn history(&self, id: String) -> Result<Vec<types::HistoryEntry>, types::Error> {
        Ok(self.0.borrow_mut().history(&id)?.wit_into())
    }

    fn maintain(&self, now: Option<i64>, dry_run: bool) -> Result<types::MaintainReport, types::Error> {
        let now = now_or_clock(now);
        let report = self.0.borrow_mut().metered("maintain", |b| {
            if dry_run {
                b.maintain_dry_run(now)
            } else {
                b.maintain(now)
            }
        })?;
        Ok(report.wit_into())
    }

    fn begin_task(&self, task: types::NewTask, now: Option<i64>) -> Result<types::TaskState, types::Error> {
        Ok(self.0.borrow_mut().begin_task(&task.wit_into(), now_or_clock(now))?.wit_into())
    }

    fn task(&self, id: String) -> Result<types::TaskState, types::Error> {
        Ok(self.0.borrow().task(&id)?.wit_into())
    }

    fn update_task(
        &self,
        id: String,
        update: types::TaskUpdate,
        expected_version: Option<u32>,
        now: Option<i64>,
    ) -> Result<types::TaskState, types::Error> {
        let state =
            self.0.borrow_mut().update_task(&id, update.wit_into(), expected_version, now_or_clock(now))?;
        Ok(state.wit_into())
    }

    fn end_task(
        &self,
        id: String,
        outcome: types::TaskOutcome,
        detail: Option<String>,
        force_distil: bool,
        may_share: bool,
        now: Option<i64>,
    ) -> Result<types::TaskEnd, types::Error> {
        let end = hindsight_types::EndTask { outcome: outcome.wit_into(), detail, force: force_distil };
        let now = now_or_clock(now);
        Ok(self.0.borrow_mut().metered("task_end", |b| b.end_task(&id, end, may_share, now))?.wit_into())
    }

    fn distill_task(
        &self,
        id: String,
        rules_only: bool,
        may_share: bool,
        now: Option<i64>,
    ) -> Result<types::TaskEnd, types::Error> {
        let now = now_or_clock(now);
        Ok(self
            .0
            .borrow_mut()
            .metered("distill", |b| b.distill_task(&id, rules_only, may_share, now))?
            .wit_into())
    }

    fn distill_trajectory(
        &self,
        trajectory: types::Trajectory,
        may_share: bool,
        now: Option<i64>,
    ) -> Result<types::TaskEnd, types::Error> {
        let now = now_or_clock(now);
        let trajectory = trajectory.wit_into();
        Ok(self
            .0
            .borrow_mut()
            .metered("distill", |b| b.distill_trajectory(trajectory, may_share, now))?
            .wit_into())
    }

    fn delete_task(&self, id: String) -> Result<(), types::Error> {
        Ok(self.0.borrow_mut().delete_task(&id)?)
    }

    fn tasks(&self, include_ended: bool) -> Result<Vec<types::TaskState>, types::Error> {
        Ok(self.0.borrow().tasks(include_ended)?.wit_into())
    }

    fn consolidate(
        &self,
        since: Option<i64>,
        now: Option<i64>,
    ) -> Result<Vec<types::Distilled>, types::Error> {
        let now = now_or_clock(now);
        Ok(self.0.borrow_mut().metered("consolidate", |b| b.consolidate(since, now))?.wit_into())
    }

    fn list(&self, q: types::ListQuery) -> Result<types::ListPage, types::Error> {
        Ok(self.0.borrow_mut().list(&q.wit_into())?.wit_into())
    }

    fn correct(
        &self,
        id: String,
        content: String,
        agent_id: Option<String>,
        now: Option<i64>,
    ) -> Result<types::Correction, types::Error> {
        Ok(self.0.borrow_mut().correct(&id, &content, agent_id.as_deref(), now_or_clock(now))?.wit_into())
    }

    fn used(
        &self,
        ids: Vec<String>,
        task_id: Option<String>,
        now: Option<i64>,
    ) -> Result<Vec<types::Memory>, types::Error> {
        Ok(self.0.borrow_mut().report_used(&ids, task_id, now_or_clock(now))?.wit_into())
    }

    fn explain(&self, id: String) -> Result<types::Explanation, types::Error> {
        Ok(self.0.borrow_mut().explain(&id)?.wit_into())
    }

    fn audit(&self) -> Result<types::Audit, types::Error> {
        Ok(self.0.borrow_mut().audit()?.wit_into())
    }

    fn health(&self, now: Option<i64>) -> Result<types::HealthReport, types::Error> {
        Ok(self.0.borrow_mut().health(now_or_clock(now))?.wit_into())
    }

    fn export_page(
        &self,
        cursor: Option<String>,
        limit: u32,
        vectors: bool,
    ) -> Result<types::ExportPage, types::Error> {
        Ok(self.0.borrow_mut().export_page(cursor.as_deref(), limit, vectors, wall_clock())?.wit_into())
    }

    fn import_lines(
        &self,
        lines: Vec<String>,
        first_line: u32,
        reembed: bool,
        check_only: bool,
        now: Option<i64>,
    ) -> Result<types::ImportReport, types::Error> {
        let report =
            self.0.borrow_mut().import_lines(&lines, first_line, reembed, check_only, now_or_clock(now))?;
        Ok(report.wit_into())
    }

    fn reembed_pending(
        &self,
        model_id: String,
        dimension: u32,
        limit: u32,
    ) -> Result<Vec<(String, String)>, types::Error> {
        Ok(self.0.borrow_mut().reembed_pending(&model_id, dimension as usize, limit)?)
    }

    fn stage_vectors(
        &self,
        model_id: String,
        dimension: u32,
        vectors: Vec<(String, Vec<f32>)>,
    ) -> Result<(), types::Error> {
        Ok(self.0.borrow_mut().stage_vectors(&model_id, dimension as usize, vectors)?)
    }

    fn switch_model(&self, model_id: String, dimension: u32, now: Option<i64>) -> Result<u32, types::Error> {
        Ok(self.0.borrow_mut().switch_model(&model_id, dimension as usize, now_or_clock(now))?)
    }

    fn reindex(&self, now: Option<i64>) -> Result<u32, types::Error> {
        Ok(self.0.borrow_mut().reindex(now_or_clock(now))?)
    }
}

impl From<Error> for types::Error {
    fn from(e: Error) -> Self {
        e.wit_into()
    }
}
