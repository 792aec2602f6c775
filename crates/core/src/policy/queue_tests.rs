use std::sync::atomic::AtomicU32;

use tokio::task::JoinHandle;
use tokio::time::{advance, sleep};

use super::*;

fn capacity(limit: u32, max_queue: u32) -> Arc<Capacity> {
    Capacity::new(Some(limit), None, QueuePolicy { max_queue, max_wait: Duration::from_secs(60) })
}

/// What the provider's gate would say with nothing but the slot to wait for.
fn go() -> Ready<()> {
    Ready::Now(())
}

/// A request as the proxy would make it: the fast path, else the queue.
async fn admit(c: &Arc<Capacity>, deadline: Duration) -> Result<Permit, Refusal> {
    match c.try_enter() {
        Ok(permit) => Ok(permit),
        Err(_) => c.wait(Instant::now() + deadline, go).await.map(|(permit, ())| permit),
    }
}

/// A request that holds its permit for `hold` once admitted, and says when it finished.
fn request(c: &Arc<Capacity>, deadline: Duration, hold: Duration) -> JoinHandle<Result<Duration, Refusal>> {
    let c = Arc::clone(c);
    tokio::spawn(async move {
        let started = Instant::now();
        let permit = admit(&c, deadline).await?;
        sleep(hold).await;
        drop(permit);
        Ok(started.elapsed())
    })
}

/// Lets every spawned task run up to its next wait.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_300ms_holder_serves_the_line_in_order_and_a_hopeless_waiter_is_told_at_once() {
    let c = capacity(1, 8);
    let hold = Duration::from_millis(300);
    // Four at once, a 5 s deadline each: one at a time, all in time.
    let first: Vec<_> = (0..4).map(|_| request(&c, Duration::from_secs(5), hold)).collect();
    let mut finished = Vec::new();
    for r in first {
        finished.push(r.await.unwrap().unwrap());
        settle().await;
    }
    let ms: Vec<u128> = finished.iter().map(Duration::as_millis).collect();
    assert_eq!(ms, [300, 600, 900, 1200]);
    assert_eq!(c.counters().snapshot().served, 3, "three waited, one went at once");

    // Again, now that a hold is known to take 300 ms: the fourth has 500 ms,
    // and three holds (900 ms) are ahead of it, so it is refused at once.
    let three: Vec<_> = (0..3).map(|_| request(&c, Duration::from_secs(5), hold)).collect();
    settle().await;
    let asked = Instant::now();
    let fourth = admit(&c, Duration::from_millis(500)).await;
    assert_eq!(fourth.unwrap_err(), Refusal::WouldMissDeadline { expected: Duration::from_millis(900) });
    assert_eq!(asked.elapsed(), Duration::ZERO, "no time spent waiting in vain");
    for r in three {
        assert!(r.await.unwrap().is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_known_hold_time_a_waiter_gives_up_at_its_deadline() {
    let c = capacity(1, 8);
    let _held = c.try_enter().unwrap();
    let started = Instant::now();
    let refused = admit(&c, Duration::from_millis(500)).await.unwrap_err();
    assert_eq!(refused, Refusal::TimedOut { waited: Duration::from_millis(500) });
    assert_eq!(started.elapsed(), Duration::from_millis(500));
    let stats = c.counters().snapshot();
    assert_eq!((stats.depth, stats.refused_time), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_first_in_first_out_and_newcomers_do_not_pass_them() {
    let c = capacity(1, 16);
    let holder = c.try_enter().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (c, order) = (Arc::clone(&c), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let permit = admit(&c, Duration::from_secs(30)).await.unwrap();
            order.lock().unwrap().push(i);
            sleep(Duration::from_millis(10)).await;
            drop(permit);
        }));
        // Each is in line before the next arrives.
        settle().await;
    }
    assert_eq!(c.counters().snapshot().depth, 6);
    drop(holder);
    // A slot frees up for the head; a newcomer must not take it.
    assert_eq!(c.try_enter().unwrap_err(), Busy::Queued);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
    assert!(c.try_enter().is_ok(), "an empty line lets the fast path through again");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_leaves_frees_its_place_at_once() {
    let c = capacity(1, 2);
    let holder = c.try_enter().unwrap();
    let a = request(&c, Duration::from_secs(30), Duration::from_millis(10));
    settle().await;
    let b = request(&c, Duration::from_secs(30), Duration::from_millis(10));
    settle().await;
    assert_eq!(admit(&c, Duration::from_secs(30)).await.unwrap_err(), Refusal::QueueFull { max: 2 });
    // The first in line goes away: its place is free, and the line moves up.
    a.abort();
    assert!(a.await.unwrap_err().is_cancelled());
    let stats = c.counters().snapshot();
    assert_eq!((stats.depth, stats.left), (1, 1));
    let c2 = request(&c, Duration::from_secs(30), Duration::from_millis(10));
    settle().await;
    assert_eq!(c.counters().snapshot().depth, 2, "the freed place was taken");
    drop(holder);
    assert!(b.await.unwrap().is_ok());
    assert!(c2.await.unwrap().is_ok());
    assert_eq!(c.counters().snapshot().in_use, 0);
}

#[tokio::test(start_paused = true)]
async fn overflow_is_refused_at_once_and_the_queue_can_be_off() {
    let c = capacity(1, 1);
    let _held = c.try_enter().unwrap();
    let _waiting = request(&c, Duration::from_secs(30), Duration::ZERO);
    settle().await;
    let started = Instant::now();
    assert_eq!(admit(&c, Duration::from_secs(30)).await.unwrap_err(), Refusal::QueueFull { max: 1 });
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(c.counters().snapshot().refused_full, 1);

    let off = Capacity::new(Some(1), None, QueuePolicy::default());
    let _held = off.try_enter().unwrap();
    assert_eq!(off.try_enter().unwrap_err(), Busy::Full);
    assert_eq!(admit(&off, Duration::from_secs(30)).await.unwrap_err(), Refusal::NoQueue);
}

#[tokio::test(start_paused = true)]
async fn max_queue_wait_caps_a_wait_that_the_deadline_would_allow() {
    let c = Capacity::new(Some(1), None, QueuePolicy { max_queue: 4, max_wait: Duration::from_secs(2) });
    let _held = c.try_enter().unwrap();
    let started = Instant::now();
    let refused = admit(&c, Duration::from_secs(300)).await.unwrap_err();
    assert_eq!(refused, Refusal::TimedOut { waited: Duration::from_secs(2) });
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn the_head_waits_for_a_cool_down_it_can_see_and_refuses_one_past_its_deadline() {
    let c = capacity(4, 4);
    let cool_until = Instant::now() + Duration::from_secs(3);
    let gate = || if Instant::now() >= cool_until { Ready::Now("ticket") } else { Ready::At(cool_until) };
    let started = Instant::now();
    let (_permit, ticket) = c.wait(started + Duration::from_secs(10), gate).await.unwrap();
    assert_eq!((ticket, started.elapsed()), ("ticket", Duration::from_secs(3)));
    let later = Instant::now() + Duration::from_secs(20);
    let refused = c.wait(Instant::now() + Duration::from_secs(10), || Ready::<()>::At(later)).await.unwrap_err();
    assert_eq!(refused, Refusal::NotInTime { ready_in: Duration::from_secs(20) });
    let never = c.wait(Instant::now() + Duration::from_secs(10), || Ready::<()>::Never("circuit open".into())).await;
    assert_eq!(never.unwrap_err(), Refusal::Unavailable("circuit open".into()));
    assert_eq!(c.counters().snapshot().depth, 0);
}

#[tokio::test(start_paused = true)]
async fn a_key_with_one_lease_never_serves_two_requests_at_once() {
    // No provider cap: only the key's.
    let c = Capacity::new(None, Some(1), QueuePolicy { max_queue: 64, max_wait: Duration::from_secs(600) });
    let (now, most) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (c, now, most) = (Arc::clone(&c), Arc::clone(&now), Arc::clone(&most));
            tokio::spawn(async move {
                let lease = || c.try_lease("team-key");
                let fast = c.try_enter().ok().and_then(|p| lease().map(|l| (p, l)));
                let (_permit, _lease) = match fast {
                    Some(admitted) => admitted,
                    None => {
                        let until = Instant::now() + Duration::from_secs(600);
                        c.wait(until, || lease().map_or(Ready::Released, Ready::Now)).await.unwrap()
                    }
                };
                let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(in_flight, Ordering::SeqCst);
                sleep(Duration::from_millis(5 + i % 7)).await;
                now.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 1);
    assert_eq!(c.leased("team-key"), 0);
    assert_eq!(c.counters().snapshot().leases, 0);
}

#[tokio::test(start_paused = true)]
async fn leases_and_permits_are_released_however_the_request_ends() {
    let c = Capacity::new(Some(2), Some(1), QueuePolicy { max_queue: 4, max_wait: Duration::from_secs(60) });
    // A panic while holding both.
    let panicking = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            let _permit = c.try_enter().unwrap();
            let _lease = c.try_lease("k").unwrap();
            sleep(Duration::from_millis(1)).await;
            panic!("the handler failed");
        })
    };
    assert!(panicking.await.unwrap_err().is_panic());
    assert_eq!((c.leased("k"), c.counters().snapshot().in_use), (0, 0));
    // A client gone mid-request: its future is dropped.
    let abandoned = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            let _permit = c.try_enter().unwrap();
            let _lease = c.try_lease("k").unwrap();
            sleep(Duration::from_secs(3600)).await;
        })
    };
    settle().await;
    assert_eq!(c.leased("k"), 1);
    assert!(c.try_lease("k").is_none(), "one at a time");
    abandoned.abort();
    let _ = abandoned.await;
    assert_eq!((c.leased("k"), c.counters().snapshot().in_use), (0, 0));
    assert!(c.try_lease("k").is_some());
    // Other keys have their own room.
    let _a = c.try_lease("a").unwrap();
    assert!(c.try_lease("b").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_wakes_the_head_that_waits_for_it() {
    let c = Capacity::new(None, Some(1), QueuePolicy { max_queue: 4, max_wait: Duration::from_secs(60) });
    let lease = c.try_lease("k").unwrap();
    let waiter = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            let started = Instant::now();
            let until = started + Duration::from_secs(60);
            let (_p, _l) = c.wait(until, || c.try_lease("k").map_or(Ready::Released, Ready::Now)).await.unwrap();
            started.elapsed()
        })
    };
    settle().await;
    advance(Duration::from_millis(700)).await;
    drop(lease);
    assert_eq!(waiter.await.unwrap(), Duration::from_millis(700));
}

#[test]
fn the_provider_that_frees_up_first_is_chosen() {
    let ms = |n| Some(Duration::from_millis(n));
    assert_eq!(earliest([None, ms(900), ms(300), ms(300)]), Some(2));
    assert_eq!(earliest([None, None]), None);
    assert_eq!(earliest(std::iter::empty()), None);
}

#[tokio::test(start_paused = true)]
async fn the_expected_wait_counts_rounds_of_the_cap() {
    let c = capacity(2, 8);
    assert_eq!(c.expected_wait(), Some(Duration::ZERO), "nothing known yet");
    c.observe_hold(Duration::from_millis(400));
    let _a = c.try_enter().unwrap();
    assert_eq!(c.expected_wait(), Some(Duration::ZERO), "a slot is free");
    let _b = c.try_enter().unwrap();
    assert_eq!(c.expected_wait(), Some(Duration::from_millis(400)));
    let waiters: Vec<_> = (0..2).map(|_| request(&c, Duration::from_secs(30), Duration::ZERO)).collect();
    settle().await;
    // Two ahead and itself: three releases, two per round.
    assert_eq!(c.expected_wait(), Some(Duration::from_millis(800)));
    drop(waiters);
    assert_eq!(Capacity::new(Some(1), None, QueuePolicy::default()).expected_wait(), None, "no queue");
}

#[test]
fn out_of_reach_three_instances_take_shares_of_a_cap_of_four_that_add_up_to_four() {
    let taken: Vec<usize> = (0..3)
        .map(|rank| {
            let c = capacity(4, 0);
            c.set_share(Roll::new(3, rank));
            let mut held = Vec::new();
            while let Ok(p) = c.try_enter() {
                held.push(p);
                assert!(held.len() <= 4, "never past the whole cap");
            }
            held.len()
        })
        .collect();
    assert_eq!(taken, vec![2, 1, 1]);
}

#[test]
fn a_share_of_nothing_passes_the_provider_over_and_the_whole_cap_comes_back() {
    let c = Capacity::new(Some(1), Some(1), QueuePolicy { max_queue: 2, max_wait: Duration::from_secs(1) });
    c.set_share(Roll::new(3, 2));
    assert_eq!(c.try_enter().err(), Some(Busy::Full), "a server with one slot: this instance's share is none");
    assert!(c.try_lease("k").is_none(), "nor of the key's cap");
    assert_eq!(c.expected_wait(), None, "its part of a line of two is none either");
    c.set_share(Roll::WHOLE);
    let permit = c.try_enter().expect("the whole cap again");
    let lease = c.try_lease("k").expect("and the key's");
    assert!(!c.over_share(Roll::WHOLE, Some("k")));
    assert!(c.over_share(Roll::new(3, 1), Some("k")), "one held is past a share of none");
    drop((permit, lease));
    assert!(!c.over_share(Roll::new(3, 1), Some("k")));
}

#[tokio::test(start_paused = true)]
async fn a_shared_line_holds_only_this_instance_s_part_of_max_queue() {
    let c = Capacity::new(Some(1), None, QueuePolicy { max_queue: 4, max_wait: Duration::from_secs(60) });
    c.set_share(Roll::new(3, 0));
    let _held = c.try_enter().unwrap();
    let waiting: Vec<_> = (0..2).map(|_| request(&c, Duration::from_secs(30), Duration::from_millis(1))).collect();
    settle().await;
    assert_eq!(c.counters().depth.load(Ordering::Relaxed), 2, "a share of 2 of a line of 4 over three");
    let refused = c.wait(Instant::now() + Duration::from_secs(30), go).await.err();
    assert_eq!(refused, Some(Refusal::QueueFull { max: 2 }));
    for w in waiting {
        w.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn the_whole_cap_given_back_lets_the_first_in_line_in_at_once() {
    let c = Capacity::new(Some(2), None, QueuePolicy { max_queue: 4, max_wait: Duration::from_secs(60) });
    c.set_share(Roll::new(2, 1));
    let _held = c.try_enter().unwrap();
    let waiting = request(&c, Duration::from_secs(30), Duration::from_millis(1));
    settle().await;
    assert_eq!(c.counters().depth.load(Ordering::Relaxed), 1, "at its share of one");
    c.set_share(Roll::WHOLE);
    settle().await;
    assert_eq!(c.counters().depth.load(Ordering::Relaxed), 0, "admitted with nothing released");
    let waited = tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap().unwrap().unwrap();
    assert!(waited < Duration::from_millis(10), "{waited:?}");
}
