//! Answers from the API server kept for a while: `get` returns one only while it is
//! younger than the cache's `ttl`, and at most `capacity` are kept (when full, the stale
//! ones go first, then the oldest quarter), so that no number of users, questions or
//! namespaces grows the controller's memory without bound.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Fresh<K, V> {
    ttl: Duration,
    capacity: usize,
    answers: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> Fresh<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Fresh {
            ttl,
            capacity,
            answers: Mutex::default(),
        }
    }

    /// The answer kept for `key`, if it is still fresh.
    pub fn get(&self, key: &K) -> Option<V> {
        let answers = self.answers.lock().expect("poisoned");
        let (answer, at) = answers.get(key)?;
        (at.elapsed() < self.ttl).then(|| answer.clone())
    }

    pub fn put(&self, key: K, answer: V) {
        let mut answers = self.answers.lock().expect("poisoned");
        if answers.len() >= self.capacity {
            answers.retain(|_, (_, at)| at.elapsed() < self.ttl);
        }
        if answers.len() >= self.capacity {
            // all fresh: drop the oldest quarter
            let mut ages: Vec<Instant> = answers.values().map(|(_, at)| *at).collect();
            ages.sort_unstable();
            let cut = ages[self.capacity / 4];
            answers.retain(|_, (_, at)| *at > cut);
        }
        answers.insert(key, (answer, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_cache_keeps_at_most_its_capacity_and_the_newest_answers() {
        let cache = Fresh::new(Duration::from_secs(60), 8);
        for i in 0..100 {
            cache.put(i, i * 2);
            assert!(cache.answers.lock().unwrap().len() <= 8);
        }
        assert_eq!(cache.get(&99), Some(198));
        assert_eq!(cache.get(&0), None);
    }

    #[test]
    fn a_stale_answer_is_not_returned() {
        let cache = Fresh::new(Duration::ZERO, 8);
        cache.put("k", true);
        assert_eq!(cache.get(&"k"), None);
    }
}
