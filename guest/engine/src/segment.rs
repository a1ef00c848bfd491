//! Sealed index segments: an instant-distance HNSW graph over a fixed set of vectors. The graph
//! stores only row numbers (a persisted graph holds no vector twice and opens without a
//! rebuild); the vectors are the segment's own row matrix, which each point reaches through a
//! shared handle that is not serialised. After loading, graph points have no handle, and the
//! query point (which always has one) lends it: a search only measures query-to-point.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use instant_distance::{Builder, Hnsw, Point, Search};
use serde::{Deserialize, Serialize};

use crate::index::{dot, TopK};

/// Marks a row whose memory was deleted after sealing (a tombstone).
const DEAD: u32 = u32::MAX;
/// The query's row number while a search runs.
const QUERY_ROW: u32 = u32::MAX;

struct Matrix {
    rows: Arc<Vec<f32>>,
    dim: usize,
    /// Set on the query point's handle only.
    query: Vec<f32>,
}

/// A point of the graph: a row of the segment's matrix.
#[derive(Clone, Serialize, Deserialize)]
pub struct Row {
    r: u32,
    #[serde(skip)]
    matrix: Option<Arc<Matrix>>,
}

impl Row {
    fn vector<'a>(&'a self, lender: &'a Option<Arc<Matrix>>) -> &'a [f32] {
        // Built by this module only: every distance involves a point with a handle.
        let m = self.matrix.as_ref().or(lender.as_ref()).expect("one of two points has the matrix");
        if self.r == QUERY_ROW {
            &m.query
        } else {
            &m.rows[self.r as usize * m.dim..(self.r as usize + 1) * m.dim]
        }
    }
}

impl Point for Row {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(self.vector(&other.matrix), other.vector(&self.matrix))
    }
}

pub struct Segment {
    hnsw: Hnsw<Row>,
    rows: Arc<Vec<f32>>,
    dim: usize,
    /// Row → slot (DEAD once deleted).
    slots: Vec<u32>,
    row_of: FxHashMap<u32, u32>,
}

/// Tags the binary stored form (postcard). Segments without it are JSON, as stored-format 1
/// wrote some; opening reads them and the bank's migration rewrites them in binary.
const BINARY_MAGIC: &[u8] = b"HSEG1";

/// A segment as stored: by row, the memory ids it was built over, and the graph.
#[derive(Deserialize)]
struct StoredSegment {
    ids: Vec<String>,
    hnsw: Hnsw<Row>,
}

#[derive(Serialize)]
struct StoredSegmentRef<'a> {
    ids: Vec<String>,
    hnsw: &'a Hnsw<Row>,
}

impl Segment {
    /// Builds a graph over `members` (slot, vector), all of dimension `dim`.
    pub fn build(members: &[(u32, &[f32])], dim: usize, ef_construction: usize, ef_search: usize) -> Segment {
        let mut rows = Vec::with_capacity(members.len() * dim);
        for (_, v) in members {
            rows.extend_from_slice(v);
        }
        let rows = Arc::new(rows);
        let matrix = Arc::new(Matrix { rows: rows.clone(), dim, query: Vec::new() });
        let points: Vec<Row> =
            (0..members.len() as u32).map(|r| Row { r, matrix: Some(matrix.clone()) }).collect();
        let (hnsw, _) = Builder::default()
            .ef_construction(ef_construction)
            .ef_search(ef_search)
            .seed(0x5EED)
            .build_hnsw(points);
        let slots: Vec<u32> = members.iter().map(|(s, _)| *s).collect();
        let row_of = slots.iter().enumerate().map(|(r, s)| (*s, r as u32)).collect();
        Segment { hnsw, rows, dim, slots, row_of }
    }

    /// The stored form (postcard after a magic tag); `id_of` names each live row's memory.
    pub fn to_bytes(&self, id_of: impl Fn(u32) -> Option<String>) -> Vec<u8> {
        let ids =
            self.slots.iter().map(|&s| if s == DEAD { None } else { id_of(s) }.unwrap_or_default()).collect();
        let mut bytes = BINARY_MAGIC.to_vec();
        postcard::to_io(&StoredSegmentRef { ids, hnsw: &self.hnsw }, &mut bytes)
            .expect("a segment serialises");
        bytes
    }

    /// The JSON form stored-format 1 wrote, for tests of the migration that rewrites it.
    #[cfg(test)]
    pub fn to_legacy_json(&self, id_of: impl Fn(u32) -> Option<String>) -> Vec<u8> {
        let ids =
            self.slots.iter().map(|&s| if s == DEAD { None } else { id_of(s) }.unwrap_or_default()).collect();
        serde_json::to_vec(&StoredSegmentRef { ids, hnsw: &self.hnsw }).expect("a segment serialises")
    }

    /// Whether stored bytes are in the JSON form that stored-format 1 wrote.
    pub fn is_legacy(bytes: &[u8]) -> bool {
        !bytes.starts_with(BINARY_MAGIC)
    }

    /// Reopens a stored segment: `locate` gives each id's slot and vector (none for a memory
    /// deleted since; its row becomes a tombstone with a zero vector).
    pub fn from_bytes(
        bytes: &[u8],
        dim: usize,
        mut locate: impl FnMut(&str) -> Option<(u32, Vec<f32>)>,
    ) -> Result<Segment, String> {
        let stored: StoredSegment = match bytes.strip_prefix(BINARY_MAGIC) {
            Some(binary) => postcard::from_bytes(binary).map_err(|e| e.to_string())?,
            None => serde_json::from_slice(bytes).map_err(|e| e.to_string())?,
        };
        let mut rows = vec![0f32; stored.ids.len() * dim];
        let mut slots = vec![DEAD; stored.ids.len()];
        for (r, id) in stored.ids.iter().enumerate() {
            if let Some((slot, v)) = locate(id).filter(|(_, v)| v.len() == dim) {
                rows[r * dim..(r + 1) * dim].copy_from_slice(&v);
                slots[r] = slot;
            }
        }
        let row_of =
            slots.iter().enumerate().filter(|(_, s)| **s != DEAD).map(|(r, s)| (*s, r as u32)).collect();
        Ok(Segment { hnsw: stored.hnsw, rows: Arc::new(rows), dim, slots, row_of })
    }

    pub fn len(&self) -> usize {
        self.row_of.len()
    }

    /// The live members (slot, vector), tombstoned rows left out.
    pub fn members(&self) -> impl Iterator<Item = (u32, &[f32])> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != DEAD)
            .map(|(r, s)| (*s, &self.rows[r * self.dim..(r + 1) * self.dim]))
    }

    /// A live member's vector.
    pub fn vector(&self, slot: u32) -> Option<&[f32]> {
        let r = *self.row_of.get(&slot)? as usize;
        Some(&self.rows[r * self.dim..(r + 1) * self.dim])
    }

    pub fn is_empty(&self) -> bool {
        self.row_of.is_empty()
    }

    pub fn contains(&self, slot: u32) -> bool {
        self.row_of.contains_key(&slot)
    }

    /// Tombstones a slot: it stays in the graph (so paths through it still lead on) but is never
    /// returned.
    pub fn remove(&mut self, slot: u32) -> bool {
        match self.row_of.remove(&slot) {
            Some(r) => {
                self.slots[r as usize] = DEAD;
                true
            }
            None => false,
        }
    }

    /// The `limit` most similar eligible members. The graph's candidates come first; when
    /// filters leave fewer than `limit` of them, the segment is scanned exactly so a selective
    /// filter never loses matches.
    pub fn search(&self, query: &[f32], limit: usize, eligible: &impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        // The probe lends the rows to graph points loaded from the store, which have none.
        let matrix = Matrix { rows: self.rows.clone(), dim: self.dim, query: query.to_vec() };
        let probe = Row { r: QUERY_ROW, matrix: Some(Arc::new(matrix)) };
        let mut search = Search::default();
        let mut found: Vec<(u32, f32)> = self
            .hnsw
            .search(&probe, &mut search)
            .filter_map(|item| {
                let slot = self.slots[item.point.r as usize];
                (slot != DEAD && eligible(slot)).then_some((slot, 1.0 - item.distance))
            })
            .take(limit)
            .collect();
        if found.len() < limit && found.len() < self.len() {
            let mut top = TopK::new(limit);
            for (r, &slot) in self.slots.iter().enumerate() {
                if slot != DEAD && eligible(slot) {
                    top.push(slot, dot(query, &self.rows[r * self.dim..(r + 1) * self.dim]));
                }
            }
            found = top.into_sorted();
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors(n: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut x = 11u64;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        (0..n)
            .map(|_| {
                let v: Vec<f32> = (0..dim).map(|_| next()).collect();
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
                v.iter().map(|a| a / norm).collect()
            })
            .collect()
    }

    #[test]
    fn a_segment_finds_near_neighbours_survives_storage_and_skips_tombstones() {
        let dim = 16;
        let data = vectors(400, dim);
        let members: Vec<(u32, &[f32])> =
            data.iter().enumerate().map(|(i, v)| (i as u32 + 1000, v.as_slice())).collect();
        let mut seg = Segment::build(&members, dim, 40, 64);
        let hits = seg.search(&data[7], 5, &|_| true);
        assert_eq!(hits[0].0, 1007);
        assert!((hits[0].1 - 1.0).abs() < 1e-5);

        let stored = seg.to_bytes(|s| Some(format!("m{s}")));
        let reopened = Segment::from_bytes(&stored, dim, |id| {
            let slot: u32 = id[1..].parse().ok()?;
            Some((slot, data[(slot - 1000) as usize].clone()))
        })
        .unwrap();
        assert_eq!(reopened.search(&data[7], 5, &|_| true), hits);
        // A segment stored before the binary form (JSON) still opens.
        let ids = (0..400).map(|i| format!("m{}", i + 1000)).collect();
        let json = serde_json::to_vec(&StoredSegmentRef { ids, hnsw: &seg.hnsw }).unwrap();
        assert!(json.len() > stored.len());
        let from_json = Segment::from_bytes(&json, dim, |id| {
            let slot: u32 = id[1..].parse().ok()?;
            Some((slot, data[(slot - 1000) as usize].clone()))
        })
        .unwrap();
        assert_eq!(from_json.search(&data[7], 5, &|_| true), hits);

        assert!(seg.remove(1007));
        assert!(seg.search(&data[7], 5, &|_| true).iter().all(|h| h.0 != 1007));
        // A filter that leaves one member still finds it (exact fallback).
        assert_eq!(seg.search(&data[300], 3, &|s| s == 1300)[0].0, 1300);
    }
}
