//! Which count to try next: the search (doubling, then bisecting), then the
//! confirmation of what it found, stepping down through the counts that passed until
//! one holds over the longer window. Pure: the driver runs the steps and reports back.

use std::collections::BTreeSet;

/// What to run next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A search step of this many sessions.
    Search(u32),
    /// A confirmation window at this count.
    Confirm(u32),
    /// Nothing more.
    Done,
}

/// How the chosen count was arrived at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Passed its search step and its confirmation.
    Confirmed(u32),
    /// Passed its search step; its confirmation did not run (space, or the
    /// confirmations were spent on higher counts).
    Unconfirmed(u32),
    /// Counts passed their search steps, but none held over its confirmation: the
    /// fallback count (one session per database).
    NoneConfirmed(u32),
    /// No search step passed: the fallback count.
    NonePassed(u32),
}

impl Choice {
    /// The count.
    pub fn threads(self) -> u32 {
        match self {
            Choice::Confirmed(n)
            | Choice::Unconfirmed(n)
            | Choice::NoneConfirmed(n)
            | Choice::NonePassed(n) => n,
        }
    }
}

/// The search's state.
#[derive(Clone, Debug)]
pub struct Plan {
    first: u32,
    max: u32,
    max_confirmations: u32,
    /// Counts whose search step passed.
    passed: BTreeSet<u32>,
    /// The lowest count whose search step failed.
    fail_min: Option<u32>,
    search_done: bool,
    /// Counts whose confirmation failed.
    not_confirmed: BTreeSet<u32>,
    confirmations: u32,
    confirmed: Option<u32>,
    /// Confirming stopped without a verdict (space).
    confirming_stopped: bool,
}

impl Plan {
    /// A search from `first` sessions up to `max`, then at most `max_confirmations`
    /// confirmation windows.
    pub fn new(first: u32, max: u32, max_confirmations: u32) -> Plan {
        Plan {
            first: first.clamp(1, max.max(1)),
            max: max.max(1),
            max_confirmations,
            passed: BTreeSet::new(),
            fail_min: None,
            search_done: false,
            not_confirmed: BTreeSet::new(),
            confirmations: 0,
            confirmed: None,
            confirming_stopped: false,
        }
    }

    /// The count the search starts from (and falls back to).
    pub fn first(&self) -> u32 {
        self.first
    }

    /// The next step.
    pub fn next(&self) -> Next {
        if !self.search_done
            && let Some(n) = next_count(self.pass_max(), self.fail_min, self.first, self.max)
        {
            return Next::Search(n);
        }
        if self.confirmed.is_some()
            || self.confirming_stopped
            || self.confirmations >= self.max_confirmations
        {
            return Next::Done;
        }
        self.candidate().map_or(Next::Done, Next::Confirm)
    }

    /// Records a search step's verdict.
    pub fn searched(&mut self, threads: u32, passed: bool) {
        if passed {
            self.passed.insert(threads);
        } else {
            self.fail_min = Some(self.fail_min.map_or(threads, |f| f.min(threads)));
        }
    }

    /// Ends the search where it is (its step budget or space ran out).
    pub fn end_search(&mut self) {
        self.search_done = true;
    }

    /// Records a confirmation's verdict.
    pub fn confirmed(&mut self, threads: u32, passed: bool) {
        self.confirmations += 1;
        if passed {
            self.confirmed = Some(threads);
        } else {
            self.not_confirmed.insert(threads);
        }
    }

    /// Ends confirming without a verdict (the space budget allows no confirmation).
    pub fn stop_confirming(&mut self) {
        self.search_done = true;
        self.confirming_stopped = true;
    }

    /// The count chosen, and how.
    pub fn choice(&self) -> Choice {
        if let Some(n) = self.confirmed {
            Choice::Confirmed(n)
        } else if let Some(n) = self.candidate() {
            Choice::Unconfirmed(n)
        } else if !self.passed.is_empty() {
            Choice::NoneConfirmed(self.first)
        } else {
            Choice::NonePassed(self.first)
        }
    }

    /// The count the search found: the highest whose search step passed, its
    /// confirmation not failed.
    fn candidate(&self) -> Option<u32> {
        self.passed
            .iter()
            .rev()
            .find(|n| !self.not_confirmed.contains(n))
            .copied()
    }

    fn pass_max(&self) -> Option<u32> {
        self.passed.last().copied()
    }
}

/// The next count of the search, or None when it is done: doubling from `first` until
/// a step fails, then bisecting until the gap is within an eighth of the passing count.
fn next_count(pass_max: Option<u32>, fail_min: Option<u32>, first: u32, max: u32) -> Option<u32> {
    match (pass_max, fail_min) {
        (None, Some(_)) => None,
        (Some(p), None) => (p < max).then(|| (p * 2).min(max)),
        (Some(p), Some(f)) => {
            let precision = (p / 8).max(1);
            (f > p + precision).then(|| p + (f - p) / 2)
        }
        (None, None) => Some(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the plan against a storage whose search steps pass up to `limit` sessions
    /// and whose confirmations pass up to `holds`; returns the steps and the choice.
    fn simulate(limit: u32, holds: u32, first: u32, max: u32) -> (Vec<Next>, Choice) {
        let mut plan = Plan::new(first, max, 3);
        let mut tried = Vec::new();
        loop {
            let next = plan.next();
            match next {
                Next::Search(t) => plan.searched(t, t <= limit),
                Next::Confirm(t) => plan.confirmed(t, t <= holds),
                Next::Done => break,
            }
            tried.push(next);
            assert!(tried.len() < 40);
        }
        (tried, plan.choice())
    }

    fn searched(tried: &[Next]) -> Vec<u32> {
        tried
            .iter()
            .filter_map(|n| match n {
                Next::Search(t) => Some(*t),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn doubles_then_bisects_to_within_an_eighth_then_confirms() {
        let (tried, choice) = simulate(37, 1000, 2, 256);
        assert_eq!(&searched(&tried)[..6], &[2, 4, 8, 16, 32, 64]);
        let Choice::Confirmed(chosen) = choice else {
            panic!("{choice:?}")
        };
        assert!((37 - 37 / 8..=37).contains(&chosen), "{chosen} {tried:?}");
        assert_eq!(tried.last(), Some(&Next::Confirm(chosen)));
    }

    #[test]
    fn a_count_that_does_not_hold_steps_down_to_the_next_that_passed() {
        // The rehearsal's shape: search steps pass up to 96, the longer window only up
        // to 64.
        let (tried, choice) = simulate(96, 64, 2, 256);
        assert_eq!(&searched(&tried), &[2, 4, 8, 16, 32, 64, 128, 96, 112, 104]);
        assert_eq!(
            tried[tried.len() - 2..],
            [Next::Confirm(96), Next::Confirm(64)]
        );
        assert_eq!(choice, Choice::Confirmed(64));
    }

    #[test]
    fn confirmations_are_bounded_and_the_fallback_says_so() {
        // Nothing holds: three confirmations (16, 8, 4), then the next count that passed
        // is used unconfirmed.
        let (tried, choice) = simulate(16, 0, 2, 256);
        let confirms: Vec<_> = tried
            .iter()
            .filter(|n| matches!(n, Next::Confirm(_)))
            .collect();
        assert_eq!(
            confirms,
            [&Next::Confirm(16), &Next::Confirm(8), &Next::Confirm(4)]
        );
        assert_eq!(choice, Choice::Unconfirmed(2));
        // The only count that passed fails its confirmation: back to the first count.
        let (_, choice) = simulate(2, 0, 2, 256);
        assert_eq!(choice, Choice::NoneConfirmed(2));
    }

    #[test]
    fn stops_at_the_maximum_and_when_nothing_passes() {
        let (tried, choice) = simulate(1000, 1000, 4, 16);
        assert_eq!(searched(&tried), [4, 8, 16]);
        assert_eq!(choice, Choice::Confirmed(16));
        let (tried, choice) = simulate(0, 1000, 4, 16);
        assert_eq!(tried, [Next::Search(4)]);
        assert_eq!(choice, Choice::NonePassed(4));
    }

    #[test]
    fn a_search_ended_early_confirms_what_it_has() {
        let mut plan = Plan::new(2, 256, 3);
        plan.searched(2, true);
        plan.searched(4, true);
        plan.end_search();
        assert_eq!(plan.next(), Next::Confirm(4));
        plan.stop_confirming();
        assert_eq!(plan.next(), Next::Done);
        assert_eq!(plan.choice(), Choice::Unconfirmed(4));
    }
}
