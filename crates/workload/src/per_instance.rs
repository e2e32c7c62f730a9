//! One thread per instance, with an abort flag: how the DatabaseBackup and SoftRecovery
//! tests work on every database at once, the first failure telling the others to stop.

use std::sync::atomic::{AtomicBool, Ordering};

/// Runs `work` on every item at once, one scoped thread each, and returns the results
/// in item order. `work` gets the abort flag, set as soon as any item fails, so that
/// the others can end early; a thread that panics gives `panicked()`.
pub(crate) fn run_each<I, R, E>(
    items: I,
    work: impl Fn(I::Item, &AtomicBool) -> Result<R, E> + Sync,
    panicked: impl Fn() -> E,
) -> Vec<Result<R, E>>
where
    I: IntoIterator,
    I::Item: Send,
    R: Send,
    E: Send,
{
    let abort = AtomicBool::new(false);
    let (work, abort) = (&work, &abort);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| {
                scope.spawn(move || {
                    let result = work(item, abort);
                    if result.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_order_and_a_failure_aborts_the_others() {
        let results = run_each(
            [1u32, 2, 3],
            |n, abort| {
                if n == 2 {
                    return Err("two".to_string());
                }
                // The others wait until the failure is seen.
                while !abort.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                Ok(n)
            },
            || "panicked".to_string(),
        );
        assert_eq!(results, [Ok(1), Err("two".to_string()), Ok(3)]);
        let panicked = run_each(
            [0u32],
            |_, _| -> Result<(), String> { panic!("boom") },
            || "panicked".to_string(),
        );
        assert_eq!(panicked, [Err("panicked".to_string())]);
    }
}
