//! The number of each recorded series in its [`Series`](crate::metrics::Series) table:
//! one number per combination of closed label values, dense and in range, so a series is
//! resolved once and then reached by its number. The matches are exhaustive: a new route,
//! mode, field or identity kind does not compile until it has its number.

use prometheus::IntCounterVec;

use crate::classify::RouteKind;
use crate::decide::Mode;
use crate::identify::{ClientId, Via};
use crate::inspect::Field;
use crate::metrics::slots::{FIELD, MODE, OUTCOME, ROUTE};
use crate::metrics::Series;

/// Every value of [`Outcome::outcome`](super::Outcome::outcome).
pub const OUTCOMES: [&str; 7] = [
    "forwarded",
    "routed",
    "stripped",
    "rejected",
    "refused",
    "error",
    "cancelled",
];

/// `mmgate_client_requests_total` for one policy's clients: numbered by client (in policy
/// order, anonymous last) and outcome. Built with each gateway, as the clients are the
/// policy's.
pub struct ClientRequests {
    series: Series<IntCounterVec>,
    clients: usize,
}

impl ClientRequests {
    /// The series of `clients` named clients and the anonymous one.
    pub fn new(vec: IntCounterVec, clients: usize) -> Self {
        ClientRequests {
            series: Series::new(vec, (clients + 1) * OUTCOME),
            clients,
        }
    }

    /// Counts one request of client `id` (labelled `name`) with `outcome`.
    pub fn inc(&self, id: ClientId, name: &str, outcome: &str) {
        let client = match id {
            ClientId::Named(i) if i < self.clients => Some(i),
            ClientId::Named(_) => None,
            ClientId::Anonymous => Some(self.clients),
        };
        let slot = client.and_then(|c| Some(c * OUTCOME + outcome_number(outcome)?));
        self.series.with(slot, &[name, outcome], |c| c.inc());
    }
}

fn outcome_number(outcome: &str) -> Option<usize> {
    OUTCOMES.iter().position(|x| *x == outcome)
}

/// A route's number (`ungated` last); the duration series are numbered by route alone.
pub(super) fn route(route: Option<RouteKind>) -> usize {
    route.map_or(ROUTE - 1, |r| r as usize)
}

/// The number of a requests series, if the outcome is one of [`OUTCOMES`].
pub(super) fn requests(r: Option<RouteKind>, m: Option<Mode>, outcome: &str) -> Option<usize> {
    Some((route(r) * MODE + mode(m)) * OUTCOME + outcome_number(outcome)?)
}

/// The number of an offending-requests series.
pub(super) fn offending(r: Option<RouteKind>, m: Option<Mode>, f: Field) -> usize {
    (route(r) * MODE + mode(m)) * FIELD + field(f)
}

/// The number of a stripped-fields series.
pub(super) fn stripped(r: Option<RouteKind>, f: Field) -> usize {
    route(r) * FIELD + field(f)
}

/// The number of an identified-requests series.
pub(super) fn via(via: Via) -> usize {
    match via {
        Via::Certificate => 0,
        Via::ApiKey => 1,
        Via::Header => 2,
        Via::Anonymous => 3,
    }
}

fn mode(mode: Option<Mode>) -> usize {
    match mode {
        Some(Mode::Pass) => 0,
        Some(Mode::Shadow) => 1,
        Some(Mode::Strip) => 2,
        Some(Mode::Reject) => 3,
        Some(Mode::Route(_)) => 4,
        None => 5,
    }
}

fn field(f: Field) -> usize {
    match f {
        Field::MmProcessorKwargs => 0,
        Field::MediaIoKwargs => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::metrics::slots::VIA;

    const MODES: [Option<Mode>; 6] = [
        Some(Mode::Pass),
        Some(Mode::Shadow),
        Some(Mode::Strip),
        Some(Mode::Reject),
        Some(Mode::Route(0)),
        None,
    ];

    fn routes() -> impl Iterator<Item = Option<RouteKind>> {
        RouteKind::ALL.map(Some).into_iter().chain([None])
    }

    /// Checks that `numbers` are distinct and below `size`.
    fn dense(numbers: impl Iterator<Item = usize>, size: usize) {
        let mut seen = BTreeSet::new();
        for n in numbers {
            assert!(n < size, "{n} is out of range {size}");
            assert!(seen.insert(n), "{n} is shared");
        }
    }

    #[test]
    fn every_label_combination_has_its_own_number_in_range() {
        dense(
            routes().flat_map(|r| {
                MODES.into_iter().flat_map(move |m| {
                    OUTCOMES.map(|o| requests(r, m, o).expect("a known outcome"))
                })
            }),
            ROUTE * MODE * OUTCOME,
        );
        dense(
            routes().flat_map(|r| {
                MODES
                    .into_iter()
                    .flat_map(move |m| Field::ALL.map(|f| offending(r, m, f)))
            }),
            ROUTE * MODE * FIELD,
        );
        dense(
            routes().flat_map(|r| Field::ALL.map(|f| stripped(r, f))),
            ROUTE * FIELD,
        );
        dense(routes().map(route), ROUTE);
        let vias = [Via::Certificate, Via::ApiKey, Via::Header, Via::Anonymous];
        dense(vias.into_iter().map(via), VIA);
        assert_eq!(requests(None, None, "made-up"), None);
    }
}
