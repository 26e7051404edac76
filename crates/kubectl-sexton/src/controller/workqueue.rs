//! A FIFO work queue of keys with client-go's workqueue semantics: a key is queued once
//! however many events name it; a key being worked on is not handed out again, and if it
//! was added meanwhile it is queued again (at the back) when its work is done; keys are
//! handed out in the order they were queued.
//!
//! Why not kube-runtime's controller: at its concurrency limit it hands a freed slot to any
//! one of the waiting objects (a hash set's order), so under a backlog some pods waited 30 s
//! while later ones went through; run unbounded, it starts a task per waiting object and
//! polls every one of them on each wake-up (BENCHMARKS.md "Controllers at scale"). Here a
//! waiting key costs a queue slot and a set entry, and every operation is O(1).

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    /// One permit per key made available, and every waiter woken on close.
    ready: Notify,
}

struct State<K> {
    fifo: VecDeque<K>,
    /// the keys in `fifo`
    queued: HashSet<K>,
    /// the keys handed out and not yet done
    working: HashSet<K>,
    /// keys added while worked on: queued again when done
    again: HashSet<K>,
    closed: bool,
}

/// Room kept for this many keys when the queue drains.
const KEPT: usize = 1024;

impl<K: Hash + Eq> State<K> {
    /// A relist queues every pod of the cache at once; once they are handed out, the room
    /// they took (the queue's and the set's, ~0.5 kB a pod key) is given back rather than
    /// kept for the life of the process.
    fn give_back_when_drained(&mut self) {
        if self.fifo.is_empty() && self.fifo.capacity() > KEPT {
            self.fifo.shrink_to(KEPT);
            self.queued.shrink_to(KEPT);
        }
    }
}

impl<K> Default for WorkQueue<K> {
    fn default() -> Self {
        WorkQueue {
            state: Mutex::new(State {
                fifo: VecDeque::new(),
                queued: HashSet::new(),
                working: HashSet::new(),
                again: HashSet::new(),
                closed: false,
            }),
            ready: Notify::new(),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> WorkQueue<K> {
    /// Queues `key` unless it is queued already; the number of keys ahead of it (None if it
    /// was not queued now: already queued, being worked on, or the queue is closed).
    pub fn add(&self, key: K) -> Option<usize> {
        let mut s = self.state.lock().expect("poisoned");
        if s.closed || s.queued.contains(&key) {
            return None;
        }
        if s.working.contains(&key) {
            s.again.insert(key);
            return None;
        }
        let ahead = s.fifo.len();
        s.queued.insert(key.clone());
        s.fifo.push_back(key);
        drop(s);
        self.ready.notify_one();
        Some(ahead)
    }

    /// Queues `key` after `delay` (a retry).
    pub fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// The oldest queued key, now being worked on (call [`WorkQueue::done`] after); waits
    /// for one. None once the queue is closed: keys still queued are not handed out.
    pub async fn next(&self) -> Option<K> {
        loop {
            // (registered before the state is read, so an add in between is not missed)
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state.lock().expect("poisoned");
                if s.closed {
                    return None;
                }
                if let Some(key) = s.fifo.pop_front() {
                    s.queued.remove(&key);
                    s.working.insert(key.clone());
                    s.give_back_when_drained();
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// The work on `key` is done; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.state.lock().expect("poisoned");
        s.working.remove(key);
        if s.again.remove(key) && !s.closed {
            s.queued.insert(key.clone());
            s.fifo.push_back(key.clone());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// No key is handed out any more; waiters get None.
    pub fn close(&self) {
        self.state.lock().expect("poisoned").closed = true;
        self.ready.notify_waiters();
    }

    /// Keys queued (not those being worked on).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().expect("poisoned").fifo.len()
    }

    /// Room for keys, queued and in the set of queued keys.
    #[cfg(test)]
    fn room(&self) -> (usize, usize) {
        let s = self.state.lock().expect("poisoned");
        (s.fifo.capacity(), s.queued.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now<T>(f: impl std::future::Future<Output = T>) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), f).await })
            .expect("the queue did not answer within 5 s")
    }

    #[test]
    fn keys_come_out_in_the_order_they_went_in_each_once() {
        let q = WorkQueue::default();
        assert_eq!(q.add("c"), Some(0));
        assert_eq!(q.add("a"), Some(1));
        assert_eq!(q.add("c"), None, "already queued");
        assert_eq!(q.add("b"), Some(2));
        assert_eq!(q.len(), 3);
        for want in ["c", "a", "b"] {
            assert_eq!(now(q.next()), Some(want));
            q.done(&want);
        }
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_key_added_while_worked_on_is_queued_again_behind_the_others() {
        let q = WorkQueue::default();
        q.add("a");
        q.add("b");
        assert_eq!(now(q.next()), Some("a"));
        assert_eq!(q.add("a"), None, "not handed out twice at once");
        assert_eq!(q.len(), 1);
        q.done(&"a");
        assert_eq!(now(q.next()), Some("b"));
        assert_eq!(
            now(q.next()),
            Some("a"),
            "again, after what was queued before"
        );
        q.done(&"a");
        q.done(&"b");
        assert_eq!(q.len(), 0, "done without a new add: not queued again");
    }

    #[test]
    fn a_waiting_worker_is_woken_by_an_add_and_by_close() {
        let q = Arc::new(WorkQueue::default());
        now(async {
            let waiter = tokio::spawn({
                let q = q.clone();
                async move { q.next().await }
            });
            tokio::task::yield_now().await;
            q.add(7);
            assert_eq!(waiter.await.unwrap(), Some(7));
            let waiter = tokio::spawn({
                let q = q.clone();
                async move { q.next().await }
            });
            tokio::task::yield_now().await;
            q.close();
            assert_eq!(waiter.await.unwrap(), None);
        });
    }

    #[test]
    fn closed_hands_out_nothing_more_and_takes_nothing() {
        let q = WorkQueue::default();
        q.add(1);
        q.add(2);
        assert_eq!(now(q.next()), Some(1));
        q.add(1);
        q.close();
        q.done(&1);
        assert_eq!(now(q.next()), None, "2 is still queued but not handed out");
        assert_eq!(q.add(3), None);
    }

    #[test]
    fn a_drained_queue_gives_its_room_back() {
        let q = WorkQueue::default();
        for k in 0..10 * KEPT {
            q.add(k);
        }
        assert!(q.room().0 >= 10 * KEPT && q.room().1 >= 10 * KEPT);
        for _ in 0..10 * KEPT - 1 {
            let k = now(q.next()).unwrap();
            q.done(&k);
        }
        assert!(q.room().0 >= KEPT * 2, "kept while keys wait");
        let last = now(q.next()).unwrap();
        let (fifo, set) = q.room();
        assert!(fifo < 2 * KEPT && set < 2 * KEPT, "{fifo}, {set}");
        q.done(&last);
        q.add(1);
        assert_eq!(now(q.next()), Some(1), "still works");
    }

    #[test]
    fn a_retry_comes_back_after_its_delay() {
        let q = Arc::new(WorkQueue::default());
        now(async {
            let t = std::time::Instant::now();
            q.add_after("x", Duration::from_millis(200));
            tokio::task::yield_now().await;
            assert_eq!(q.len(), 0, "not before its delay");
            assert_eq!(q.next().await, Some("x"));
            assert!(t.elapsed() >= Duration::from_millis(200));
        });
    }
}
