//! Whether a manifest or a file may hold rows a filter matches: the partition filter (the
//! scan's filter projected through each partition spec's transforms) against a manifest's
//! partition summaries and a file's partition tuple, and the filter itself against a file's
//! column metrics. Every answer errs towards "may match": a plan may read a file it did not
//! need, never miss one it did. The rules follow Java's `ManifestEvaluator`,
//! `Evaluator` and `InclusiveMetricsEvaluator`; the `iceberg` crate keeps its own evaluators
//! private, and its public `Transform::project` does the projection.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use iceberg::expr::{Bind, BoundPredicate, BoundReference, Predicate, PredicateOperator};
use iceberg::spec::{
    DataFile, Datum, FieldSummary, Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema,
    SchemaRef, Struct, Type,
};

/// Java's limit: `in` with more values than this is not checked against bounds.
const IN_PREDICATE_LIMIT: usize = 200;

/// Orders two values of one type; `None` when their kinds differ (a column promoted since the
/// file was written) or a float is NaN, which callers read as "may match".
fn compare(a: &PrimitiveLiteral, b: &PrimitiveLiteral) -> Option<Ordering> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) || a.is_nan() || b.is_nan() {
        return None;
    }
    a.partial_cmp(b)
}

fn prefix_of(value: &PrimitiveLiteral, len: usize) -> Option<String> {
    match value {
        PrimitiveLiteral::String(s) => Some(s.chars().take(len).collect()),
        _ => None,
    }
}

fn text(datum: &Datum) -> Option<&str> {
    match datum.literal() {
        PrimitiveLiteral::String(s) => Some(s),
        _ => None,
    }
}

/// The scan's filter as it applies to one partition spec.
pub struct PartitionFilter {
    /// Bound to the spec's partition tuple; `None`: every partition may match.
    predicate: Option<BoundPredicate>,
    /// Position in the tuple of each partition field id.
    positions: HashMap<i32, usize>,
    /// Each partition field's result type, in tuple order.
    types: Vec<Option<PrimitiveType>>,
}

impl PartitionFilter {
    /// Projects `filter` (bound to `schema`) through `spec`. A spec the schema cannot type (a
    /// source column dropped since) prunes nothing.
    pub fn new(filter: &BoundPredicate, spec: &PartitionSpec, schema: &Schema) -> PartitionFilter {
        let everything = PartitionFilter {
            predicate: None,
            positions: HashMap::new(),
            types: Vec::new(),
        };
        let Ok(partition_type) = spec.partition_type(schema) else {
            return everything;
        };
        let types = partition_type
            .fields()
            .iter()
            .map(|f| match f.field_type.as_ref() {
                Type::Primitive(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        let positions = spec
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| (f.field_id, i))
            .collect();
        let Some(projected) = project(filter, spec) else {
            return everything;
        };
        let Ok(partition_schema) = Schema::builder()
            .with_fields(partition_type.fields().to_vec())
            .build()
        else {
            return everything;
        };
        let predicate = projected
            .bind(SchemaRef::from(Arc::new(partition_schema)), true)
            .ok();
        PartitionFilter {
            predicate,
            positions,
            types,
        }
    }

    /// Whether a manifest whose partition summaries are `summaries` may hold a matching file.
    pub fn may_match_summaries(&self, summaries: Option<&[FieldSummary]>) -> bool {
        let (Some(predicate), Some(summaries)) = (&self.predicate, summaries) else {
            return true;
        };
        self.summary_may_match(predicate, summaries)
    }

    fn summary_may_match(&self, p: &BoundPredicate, summaries: &[FieldSummary]) -> bool {
        match p {
            BoundPredicate::AlwaysTrue => true,
            BoundPredicate::AlwaysFalse => false,
            BoundPredicate::And(e) => {
                let [l, r] = e.inputs();
                self.summary_may_match(l, summaries) && self.summary_may_match(r, summaries)
            }
            BoundPredicate::Or(e) => {
                let [l, r] = e.inputs();
                self.summary_may_match(l, summaries) || self.summary_may_match(r, summaries)
            }
            BoundPredicate::Not(_) => true,
            BoundPredicate::Unary(e) => {
                let Some((summary, _)) = self.summary(e.term(), summaries) else {
                    return true;
                };
                let all_null = summary.contains_null
                    && summary.lower_bound.is_none()
                    && summary.contains_nan != Some(true);
                match e.op() {
                    PredicateOperator::IsNull => summary.contains_null,
                    PredicateOperator::NotNull => !all_null,
                    PredicateOperator::IsNan => summary.contains_nan != Some(false) && !all_null,
                    _ => true,
                }
            }
            BoundPredicate::Binary(e) => {
                let Some((summary, ty)) = self.summary(e.term(), summaries) else {
                    return true;
                };
                let bound = |b: Option<&[u8]>| summary_bound(b, &ty);
                let (lower, upper) = (
                    bound(summary.lower_bound.as_deref().map(|b| &b[..])),
                    bound(summary.upper_bound.as_deref().map(|b| &b[..])),
                );
                bounds_may_match(e.op(), e.literal(), lower.as_ref(), upper.as_ref(), true)
            }
            BoundPredicate::Set(e) => {
                let Some((summary, ty)) = self.summary(e.term(), summaries) else {
                    return true;
                };
                if e.op() != PredicateOperator::In || e.literals().len() > IN_PREDICATE_LIMIT {
                    return true;
                }
                let bound = |b: Option<&[u8]>| summary_bound(b, &ty);
                let (Some(lower), Some(upper)) = (
                    bound(summary.lower_bound.as_deref().map(|b| &b[..])),
                    bound(summary.upper_bound.as_deref().map(|b| &b[..])),
                ) else {
                    // No bounds: every value is null (or NaN): `in` matches none of them.
                    return summary.lower_bound.is_some() || summary.upper_bound.is_some();
                };
                e.literals().iter().any(|v| {
                    compare(v.literal(), lower.literal()) != Some(Ordering::Less)
                        && compare(v.literal(), upper.literal()) != Some(Ordering::Greater)
                })
            }
        }
    }

    fn summary<'a>(
        &self,
        term: &BoundReference,
        summaries: &'a [FieldSummary],
    ) -> Option<(&'a FieldSummary, PrimitiveType)> {
        let position = *self.positions.get(&term.field().id)?;
        let ty = self.types.get(position)?.clone()?;
        Some((summaries.get(position)?, ty))
    }

    /// Whether a file of partition `tuple` may hold a matching row (exact on the tuple).
    pub fn matches_partition(&self, tuple: &Struct) -> bool {
        match &self.predicate {
            None => true,
            Some(p) => self.tuple_matches(p, tuple),
        }
    }

    fn tuple_matches(&self, p: &BoundPredicate, tuple: &Struct) -> bool {
        let value = |term: &BoundReference| -> Result<Option<&PrimitiveLiteral>, ()> {
            let position = *self.positions.get(&term.field().id).ok_or(())?;
            match tuple.fields().get(position).ok_or(())? {
                None => Ok(None),
                Some(Literal::Primitive(v)) => Ok(Some(v)),
                Some(_) => Err(()),
            }
        };
        match p {
            BoundPredicate::AlwaysTrue => true,
            BoundPredicate::AlwaysFalse => false,
            BoundPredicate::And(e) => {
                let [l, r] = e.inputs();
                self.tuple_matches(l, tuple) && self.tuple_matches(r, tuple)
            }
            BoundPredicate::Or(e) => {
                let [l, r] = e.inputs();
                self.tuple_matches(l, tuple) || self.tuple_matches(r, tuple)
            }
            BoundPredicate::Not(_) => true,
            BoundPredicate::Unary(e) => match value(e.term()) {
                Err(()) => true,
                Ok(v) => match e.op() {
                    PredicateOperator::IsNull => v.is_none(),
                    PredicateOperator::NotNull => v.is_some(),
                    PredicateOperator::IsNan => v.is_some_and(PrimitiveLiteral::is_nan),
                    PredicateOperator::NotNan => !v.is_some_and(PrimitiveLiteral::is_nan),
                    _ => true,
                },
            },
            BoundPredicate::Binary(e) => match value(e.term()) {
                Err(()) => true,
                Ok(v) => value_matches(e.op(), v, e.literal()),
            },
            BoundPredicate::Set(e) => match value(e.term()) {
                Err(()) => true,
                Ok(None) => e.op() == PredicateOperator::NotIn,
                Ok(Some(v)) => {
                    let found = e.literals().iter().any(|l| l.literal() == v);
                    match e.op() {
                        PredicateOperator::In => found,
                        _ => !found,
                    }
                }
            },
        }
    }
}

fn summary_bound(bytes: Option<&[u8]>, ty: &PrimitiveType) -> Option<Datum> {
    bytes.and_then(|b| Datum::try_from_bytes(b, ty.clone()).ok())
}

/// Exact evaluation of `value op literal` on one value (null and NaN compare false).
fn value_matches(op: PredicateOperator, value: Option<&PrimitiveLiteral>, literal: &Datum) -> bool {
    use PredicateOperator as O;
    let Some(value) = value else {
        return matches!(op, O::NotEq | O::NotStartsWith);
    };
    match op {
        O::StartsWith | O::NotStartsWith => {
            let (PrimitiveLiteral::String(v), Some(prefix)) = (value, text(literal)) else {
                return true;
            };
            v.starts_with(prefix) == (op == O::StartsWith)
        }
        _ => {
            if value.is_nan() || literal.literal().is_nan() {
                return op == O::NotEq;
            }
            let Some(order) = compare(value, literal.literal()) else {
                return true;
            };
            match op {
                O::LessThan => order == Ordering::Less,
                O::LessThanOrEq => order != Ordering::Greater,
                O::GreaterThan => order == Ordering::Greater,
                O::GreaterThanOrEq => order != Ordering::Less,
                O::Eq => order == Ordering::Equal,
                O::NotEq => order != Ordering::Equal,
                _ => true,
            }
        }
    }
}

/// Whether values between `lower` and `upper` may satisfy `op literal`. `absent_excludes`: a
/// missing bound means every value is null (partition summaries), not that none was kept.
fn bounds_may_match(
    op: PredicateOperator,
    literal: &Datum,
    lower: Option<&Datum>,
    upper: Option<&Datum>,
    absent_excludes: bool,
) -> bool {
    use PredicateOperator as O;
    let lit = literal.literal();
    let order = |bound: Option<&Datum>| bound.and_then(|b| compare(b.literal(), lit));
    let needs_lower = matches!(op, O::LessThan | O::LessThanOrEq | O::Eq | O::StartsWith);
    let needs_upper = matches!(
        op,
        O::GreaterThan | O::GreaterThanOrEq | O::Eq | O::StartsWith
    );
    if absent_excludes && ((needs_lower && lower.is_none()) || (needs_upper && upper.is_none())) {
        return false;
    }
    match op {
        O::LessThan => {
            order(lower) != Some(Ordering::Greater) && order(lower) != Some(Ordering::Equal)
        }
        O::LessThanOrEq => order(lower) != Some(Ordering::Greater),
        O::GreaterThan => {
            order(upper) != Some(Ordering::Less) && order(upper) != Some(Ordering::Equal)
        }
        O::GreaterThanOrEq => order(upper) != Some(Ordering::Less),
        O::Eq => order(lower) != Some(Ordering::Greater) && order(upper) != Some(Ordering::Less),
        O::StartsWith => {
            let Some(prefix) = text(literal) else {
                return true;
            };
            let len = prefix.chars().count();
            let below = lower
                .and_then(|l| prefix_of(l.literal(), len))
                .is_some_and(|l| l.as_str() > prefix);
            let above = upper
                .and_then(|u| prefix_of(u.literal(), len))
                .is_some_and(|u| u.as_str() < prefix);
            !below && !above
        }
        _ => true,
    }
}

/// The scan's filter (bound to the scan's schema) against files' column metrics.
pub struct MetricsFilter<'a> {
    predicate: &'a BoundPredicate,
}

impl<'a> MetricsFilter<'a> {
    pub fn new(predicate: &'a BoundPredicate) -> Self {
        Self { predicate }
    }

    /// Whether `file` may hold a row the filter matches.
    pub fn may_match(&self, file: &DataFile) -> bool {
        if file.record_count() == 0 {
            return false;
        }
        may_match_metrics(self.predicate, file)
    }
}

fn may_match_metrics(p: &BoundPredicate, file: &DataFile) -> bool {
    use PredicateOperator as O;
    let counts = |term: &BoundReference| {
        let id = term.field().id;
        (
            file.value_counts().get(&id).copied(),
            file.null_value_counts().get(&id).copied(),
            file.nan_value_counts().get(&id).copied(),
        )
    };
    let nulls_only = |term: &BoundReference| match counts(term) {
        (Some(values), Some(nulls), _) => values == nulls,
        _ => false,
    };
    let nans_only = |term: &BoundReference| match counts(term) {
        (Some(values), _, Some(nans)) => values == nans,
        _ => false,
    };
    let bounds = |term: &BoundReference| {
        let id = term.field().id;
        (file.lower_bounds().get(&id), file.upper_bounds().get(&id))
    };
    match p {
        BoundPredicate::AlwaysTrue => true,
        BoundPredicate::AlwaysFalse => false,
        BoundPredicate::And(e) => {
            let [l, r] = e.inputs();
            may_match_metrics(l, file) && may_match_metrics(r, file)
        }
        BoundPredicate::Or(e) => {
            let [l, r] = e.inputs();
            may_match_metrics(l, file) || may_match_metrics(r, file)
        }
        BoundPredicate::Not(_) => true,
        BoundPredicate::Unary(e) => {
            let (_, nulls, nans) = counts(e.term());
            match e.op() {
                O::IsNull => nulls != Some(0),
                O::NotNull => !nulls_only(e.term()),
                O::IsNan => nans != Some(0) && !nulls_only(e.term()),
                O::NotNan => !nans_only(e.term()),
                _ => true,
            }
        }
        BoundPredicate::Binary(e) => {
            if matches!(e.op(), O::NotEq | O::NotStartsWith) {
                return true;
            }
            if nulls_only(e.term()) || nans_only(e.term()) {
                return false;
            }
            let (lower, upper) = bounds(e.term());
            // Bounds of a float column may be NaN (older writers): they prove nothing.
            if lower.is_some_and(Datum::is_nan) || upper.is_some_and(Datum::is_nan) {
                return true;
            }
            bounds_may_match(e.op(), e.literal(), lower, upper, false)
        }
        BoundPredicate::Set(e) => {
            if e.op() != O::In {
                return true;
            }
            if nulls_only(e.term()) || nans_only(e.term()) {
                return false;
            }
            if e.literals().len() > IN_PREDICATE_LIMIT {
                return true;
            }
            let (lower, upper) = bounds(e.term());
            if lower.is_some_and(Datum::is_nan) || upper.is_some_and(Datum::is_nan) {
                return true;
            }
            e.literals().iter().any(|v| {
                lower.and_then(|l| compare(v.literal(), l.literal())) != Some(Ordering::Less)
                    && upper.and_then(|u| compare(v.literal(), u.literal()))
                        != Some(Ordering::Greater)
            })
        }
    }
}

/// `filter` projected onto `spec`'s partition fields (inclusive: every row the filter matches
/// is in a partition the projection matches). `None`: nothing can be said.
fn project(filter: &BoundPredicate, spec: &PartitionSpec) -> Option<Predicate> {
    match filter {
        BoundPredicate::AlwaysTrue => None,
        BoundPredicate::AlwaysFalse => Some(Predicate::AlwaysFalse),
        BoundPredicate::And(e) => {
            let [l, r] = e.inputs();
            match (project(l, spec), project(r, spec)) {
                (Some(l), Some(r)) => Some(l.and(r)),
                (one, None) | (None, one) => one,
            }
        }
        BoundPredicate::Or(e) => {
            let [l, r] = e.inputs();
            Some(project(l, spec)?.or(project(r, spec)?))
        }
        BoundPredicate::Not(_) => None,
        BoundPredicate::Unary(_) | BoundPredicate::Binary(_) | BoundPredicate::Set(_) => {
            let source = match filter {
                BoundPredicate::Unary(e) => e.term().field().id,
                BoundPredicate::Binary(e) => e.term().field().id,
                BoundPredicate::Set(e) => e.term().field().id,
                _ => unreachable!("leaves only"),
            };
            spec.fields()
                .iter()
                .filter(|f| f.source_id == source)
                .filter_map(|f| f.transform.project(&f.name, filter).ok().flatten())
                .reduce(Predicate::and)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::tables::plan::filter::Filter;
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, NestedField, Transform};
    use serde_json::json;

    fn schema() -> SchemaRef {
        Arc::new(
            Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                    NestedField::optional(2, "ts", Type::Primitive(PrimitiveType::Timestamp))
                        .into(),
                    NestedField::optional(3, "s", Type::Primitive(PrimitiveType::String)).into(),
                ])
                .build()
                .unwrap(),
        )
    }

    fn bind(filter: serde_json::Value) -> BoundPredicate {
        Filter::parse(Some(&filter))
            .unwrap()
            .bind(&schema(), true)
            .unwrap()
    }

    fn spec() -> PartitionSpec {
        PartitionSpec::builder(schema())
            .with_spec_id(1)
            .add_partition_field("ts", "ts_day", Transform::Day)
            .unwrap()
            .add_partition_field("id", "id_bucket", Transform::Bucket(4))
            .unwrap()
            .build()
            .unwrap()
    }

    fn file(lower: i64, upper: i64, nulls: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("s3://b/t/data/f.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .file_size_in_bytes(10)
            .record_count(10)
            .partition(Struct::empty())
            .partition_spec_id(0)
            .value_counts(HashMap::from([(1, 10)]))
            .null_value_counts(HashMap::from([(1, nulls)]))
            .lower_bounds(HashMap::from([(1, Datum::long(lower))]))
            .upper_bounds(HashMap::from([(1, Datum::long(upper))]))
            .build()
            .unwrap()
    }

    #[test]
    fn metrics_exclude_only_what_the_bounds_prove() {
        let f = file(10, 20, 0);
        let may = |filter| MetricsFilter::new(&bind(filter)).may_match(&f);
        assert!(!may(json!({"type": "lt", "term": "id", "value": 10})));
        assert!(may(json!({"type": "lt-eq", "term": "id", "value": 10})));
        assert!(!may(json!({"type": "gt", "term": "id", "value": 20})));
        assert!(may(json!({"type": "eq", "term": "id", "value": 15})));
        assert!(!may(json!({"type": "eq", "term": "id", "value": 21})));
        assert!(!may(
            json!({"type": "in", "term": "id", "values": [1, 2, 30]})
        ));
        assert!(may(json!({"type": "in", "term": "id", "values": [1, 12]})));
        assert!(may(json!({"type": "not-eq", "term": "id", "value": 15})));
        assert!(!may(
            json!({"type": "not", "child": {"type": "gt-eq", "term": "id", "value": 10}})
        ));
        // No metrics for the column: nothing is proved.
        assert!(may(json!({"type": "eq", "term": "s", "value": "x"})));
    }

    #[test]
    fn partitions_are_judged_through_the_transforms() {
        let filter = bind(json!({"type": "and",
            "left": {"type": "gt-eq", "term": "ts", "value": "2024-01-02T00:00:00"},
            "right": {"type": "eq", "term": "id", "value": 7}}));
        let p = PartitionFilter::new(&filter, &spec(), &schema());
        let day = |d: i32, bucket: i32| {
            Struct::from_iter([Some(Literal::date(d)), Some(Literal::int(bucket))])
        };
        let jan_2 = 19724;
        let bucket_of_7 = {
            let b = Transform::Bucket(4);
            let f = iceberg::transform::create_transform_function(&b).unwrap();
            match f
                .transform_literal(&Datum::long(7))
                .unwrap()
                .unwrap()
                .literal()
            {
                PrimitiveLiteral::Int(v) => *v,
                other => panic!("{other:?}"),
            }
        };
        assert!(p.matches_partition(&day(jan_2, bucket_of_7)));
        assert!(!p.matches_partition(&day(jan_2 - 1, bucket_of_7)));
        assert!(!p.matches_partition(&day(jan_2 + 5, (bucket_of_7 + 1) % 4)));
    }
}
