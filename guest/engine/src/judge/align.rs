//! Aligning two token sequences (Ratcliff/Obershelp, as Python's difflib): the stretches they
//! share and the edits between them. Two statements on one template ("The staging DB listens on
//! port 5433" / "The production DB …") differ in slots; where a slot sits and what fills it
//! says whether the subject or the value changed.

#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// `old[a]` replaced by `new[b]`.
    Replace {
        old: std::ops::Range<usize>,
        new: std::ops::Range<usize>,
    },
    Delete {
        old: std::ops::Range<usize>,
    },
    Insert {
        new: std::ops::Range<usize>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Alignment {
    pub edits: Vec<Edit>,
    /// 2 × matched / (len(old) + len(new)): 1 for the same sequence.
    pub ratio: f32,
}

/// The longest common run in `a[a0..a1]` and `b[b0..b1]`: (start in a, start in b, length).
fn longest_match<T: PartialEq>(
    a: &[T],
    b: &[T],
    (a0, a1): (usize, usize),
    (b0, b1): (usize, usize),
) -> (usize, usize, usize) {
    let mut best = (a0, b0, 0);
    // lengths[j]: the run ending at a[i-1], b[j-1]
    let mut previous = vec![0usize; b1 - b0 + 1];
    for (i, x) in a.iter().enumerate().take(a1).skip(a0) {
        let mut current = vec![0usize; b1 - b0 + 1];
        for (j, y) in b.iter().enumerate().take(b1).skip(b0) {
            if x == y {
                let k = previous[j - b0] + 1;
                current[j - b0 + 1] = k;
                if k > best.2 {
                    best = (i + 1 - k, j + 1 - k, k);
                }
            }
        }
        previous = current;
    }
    best
}

fn matching_blocks<T: PartialEq>(a: &[T], b: &[T]) -> Vec<(usize, usize, usize)> {
    let mut queue = vec![((0, a.len()), (0, b.len()))];
    let mut blocks = Vec::new();
    while let Some(((a0, a1), (b0, b1))) = queue.pop() {
        let (i, j, k) = longest_match(a, b, (a0, a1), (b0, b1));
        if k > 0 {
            blocks.push((i, j, k));
            if a0 < i && b0 < j {
                queue.push(((a0, i), (b0, j)));
            }
            if i + k < a1 && j + k < b1 {
                queue.push(((i + k, a1), (j + k, b1)));
            }
        }
    }
    blocks.sort_unstable();
    blocks
}

pub fn align<T: PartialEq>(a: &[T], b: &[T]) -> Alignment {
    let blocks = matching_blocks(a, b);
    let matched: usize = blocks.iter().map(|(_, _, k)| k).sum();
    let mut edits = Vec::new();
    let (mut i, mut j) = (0, 0);
    for (bi, bj, k) in blocks.into_iter().chain(std::iter::once((a.len(), b.len(), 0))) {
        match (i < bi, j < bj) {
            (true, true) => edits.push(Edit::Replace { old: i..bi, new: j..bj }),
            (true, false) => edits.push(Edit::Delete { old: i..bi }),
            (false, true) => edits.push(Edit::Insert { new: j..bj }),
            (false, false) => {}
        }
        i = bi + k;
        j = bj + k;
    }
    let total = a.len() + b.len();
    let ratio = if total == 0 { 1.0 } else { 2.0 * matched as f32 / total as f32 };
    Alignment { edits, ratio }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slot_differs() {
        let a = ["staging", "db", "listens", "port", "5433"];
        let b = ["production", "db", "listens", "port", "5432"];
        let al = align(&a, &b);
        assert_eq!(
            al.edits,
            vec![Edit::Replace { old: 0..1, new: 0..1 }, Edit::Replace { old: 4..5, new: 4..5 }]
        );
        assert!((al.ratio - 0.6).abs() < 1e-6);
    }

    #[test]
    fn insertions_deletions_and_empty_sequences() {
        let al = align(&["a", "b", "c"], &["a", "x", "b", "c", "d"]);
        assert_eq!(al.edits, vec![Edit::Insert { new: 1..2 }, Edit::Insert { new: 4..5 }]);
        assert_eq!(align::<&str>(&[], &[]).ratio, 1.0);
        assert_eq!(align(&["a"], &[]).edits, vec![Edit::Delete { old: 0..1 }]);
    }
}
