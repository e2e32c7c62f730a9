//! Where every bulk-loaded message sits in its mailbox's view (the view index's order),
//! as a pure function of the plan: within a mailbox of `n` messages, the message of
//! ordinal `i` (in id order) takes view position `p = (a·i + b) mod n`, with `a` near
//! `n / φ` and coprime with `n`, so consecutive messages land far apart, as messages
//! sorted by subject or sender do. Its view sort key spreads the positions evenly over
//! the `u32` range, the range new messages' hashed sort keys fall in.
//!
//! Both directions are cheap (the inverse permutation uses `a`'s inverse mod `n`), so
//! the planner and the page builders walk the index in key order without materialising
//! it.

/// The permutation of one mailbox.
#[derive(Clone, Copy, Debug)]
struct MailboxView {
    /// Messages in the mailbox.
    n: u64,
    a: u64,
    a_inv: u64,
    b: u64,
}

impl MailboxView {
    fn new(n: u64) -> MailboxView {
        if n <= 1 {
            return MailboxView {
                n,
                a: 1,
                a_inv: 1,
                b: 0,
            };
        }
        let mut a = ((n as f64 * 0.618_033_988_7) as u64).max(1);
        while gcd(a, n) != 1 {
            a += 1;
        }
        MailboxView {
            n,
            a,
            a_inv: mod_inverse(a, n),
            b: n / 3,
        }
    }

    fn position(&self, ordinal: u64) -> u64 {
        mul_mod(self.a, ordinal, self.n).wrapping_add(self.b) % self.n.max(1)
    }

    fn ordinal(&self, position: u64) -> u64 {
        let n = self.n.max(1);
        mul_mod(self.a_inv, (position + n - self.b % n) % n, n)
    }

    /// The sort key of view position `p`: the middle of its 1/n share of the u32 range.
    fn sort_key(&self, position: u64) -> u32 {
        (((2 * u128::from(position) + 1) << 32) / (2 * u128::from(self.n.max(1)))) as u32
    }
}

/// The view order of a bulk-loaded database: message ids `1..=messages`, mailbox `m`
/// holding ids `m·per_mailbox + 1 ..`.
#[derive(Clone, Debug)]
pub struct ViewLayout {
    messages: u64,
    per_mailbox: u64,
    mailboxes: Vec<MailboxView>,
}

impl ViewLayout {
    /// The layout of `messages` messages, `per_mailbox` per mailbox (the last ones fewer).
    pub fn new(messages: u64, per_mailbox: u64) -> ViewLayout {
        let per_mailbox = per_mailbox.max(1);
        let count = messages.div_ceil(per_mailbox);
        let mailboxes = (0..count)
            .map(|m| MailboxView::new((messages - m * per_mailbox).min(per_mailbox)))
            .collect();
        ViewLayout {
            messages,
            per_mailbox,
            mailboxes,
        }
    }

    /// The view sort key of message `message` (1-based id).
    pub fn sort_of(&self, message: u64) -> u32 {
        let m = (message - 1) / self.per_mailbox;
        let view = &self.mailboxes[m as usize];
        view.sort_key(view.position(message - 1 - m * self.per_mailbox))
    }

    /// The entry at index position `g` (0-based, in key order): (mailbox, sort key,
    /// message id).
    pub fn entry_at(&self, g: u64) -> (u32, u32, u64) {
        debug_assert!(g < self.messages);
        let m = g / self.per_mailbox;
        let view = &self.mailboxes[m as usize];
        let p = g - m * self.per_mailbox;
        let message = m * self.per_mailbox + view.ordinal(p) + 1;
        (m as u32, view.sort_key(p), message)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn mul_mod(a: u64, b: u64, n: u64) -> u64 {
    (u128::from(a) * u128::from(b) % u128::from(n.max(1))) as u64
}

/// `a⁻¹ mod n` for `a` coprime with `n` (extended Euclid).
fn mod_inverse(a: u64, n: u64) -> u64 {
    let (mut old_r, mut r) = (i128::from(a), i128::from(n));
    let (mut old_s, mut s) = (1i128, 0i128);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(i128::from(n)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mailbox_view_is_a_permutation_in_key_order() {
        for (messages, per) in [(1u64, 1u64), (10, 3), (1000, 97), (5000, 5000), (12, 100)] {
            let layout = ViewLayout::new(messages, per);
            let mut seen = vec![false; messages as usize + 1];
            let mut last: Option<(u32, u32, u64)> = None;
            for g in 0..messages {
                let entry = layout.entry_at(g);
                let (mailbox, sort, message) = entry;
                assert!((1..=messages).contains(&message));
                assert!(!seen[message as usize], "message {message} twice");
                seen[message as usize] = true;
                assert_eq!(u64::from(mailbox), (message - 1) / per);
                assert_eq!(layout.sort_of(message), sort);
                assert!(last < Some(entry), "{last:?} then {entry:?}");
                last = Some(entry);
            }
        }
    }

    #[test]
    fn consecutive_messages_are_scattered() {
        let layout = ViewLayout::new(1000, 1000);
        let sorts: Vec<u32> = (1..=1000).map(|m| layout.sort_of(m)).collect();
        let ascending = sorts.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(
            (300..700).contains(&ascending),
            "{ascending} ascending steps"
        );
    }
}
