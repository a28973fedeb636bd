//! A scan's `filter`, as clients send it: the term form of the REST spec up to 1.11 (`term`,
//! `value`, `values`, `"filter": true`) and the form of 1.12 (`left`/`right`/`child`
//! value expressions, references by name or field id, bare literals). Parsed into one tree,
//! negations pushed down to the leaves, and bound to the scan's schema with every literal
//! coerced to its column's type (Spark sends dates as day numbers and timestamps as
//! microseconds; Java sends decimals as strings).
//!
//! A leaf Floe cannot evaluate (a transform term, a function application) becomes "may match"
//! after the negations are pushed down, so it never excludes a file.

use iceberg::expr::{Bind, BoundPredicate, Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, SchemaRef, Type};
use serde_json::{Value, json};

use crate::error::CatalogError;

/// The largest filter accepted, in bytes of JSON: plan tokens carry it.
pub const MAX_FILTER_BYTES: usize = 16 * 1024;

/// A leaf's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    IsNull,
    NotNull,
    IsNan,
    NotNan,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Eq,
    NotEq,
    StartsWith,
    NotStartsWith,
    In,
    NotIn,
}

impl Op {
    fn parse(name: &str) -> Option<Op> {
        Some(match name {
            "is-null" => Op::IsNull,
            "not-null" => Op::NotNull,
            "is-nan" => Op::IsNan,
            "not-nan" => Op::NotNan,
            "lt" => Op::Lt,
            "lt-eq" => Op::LtEq,
            "gt" => Op::Gt,
            "gt-eq" => Op::GtEq,
            "eq" => Op::Eq,
            "not-eq" => Op::NotEq,
            "starts-with" => Op::StartsWith,
            "not-starts-with" => Op::NotStartsWith,
            "in" => Op::In,
            "not-in" => Op::NotIn,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::IsNull => "is-null",
            Op::NotNull => "not-null",
            Op::IsNan => "is-nan",
            Op::NotNan => "not-nan",
            Op::Lt => "lt",
            Op::LtEq => "lt-eq",
            Op::Gt => "gt",
            Op::GtEq => "gt-eq",
            Op::Eq => "eq",
            Op::NotEq => "not-eq",
            Op::StartsWith => "starts-with",
            Op::NotStartsWith => "not-starts-with",
            Op::In => "in",
            Op::NotIn => "not-in",
        }
    }

    fn negated(self) -> Op {
        match self {
            Op::IsNull => Op::NotNull,
            Op::NotNull => Op::IsNull,
            Op::IsNan => Op::NotNan,
            Op::NotNan => Op::IsNan,
            Op::Lt => Op::GtEq,
            Op::LtEq => Op::Gt,
            Op::Gt => Op::LtEq,
            Op::GtEq => Op::Lt,
            Op::Eq => Op::NotEq,
            Op::NotEq => Op::Eq,
            Op::StartsWith => Op::NotStartsWith,
            Op::NotStartsWith => Op::StartsWith,
            Op::In => Op::NotIn,
            Op::NotIn => Op::In,
        }
    }

    /// The operator with its operands swapped (`5 < x` is `x > 5`).
    fn flipped(self) -> Option<Op> {
        Some(match self {
            Op::Lt => Op::Gt,
            Op::LtEq => Op::GtEq,
            Op::Gt => Op::Lt,
            Op::GtEq => Op::LtEq,
            Op::Eq => Op::Eq,
            Op::NotEq => Op::NotEq,
            _ => return None,
        })
    }

    fn arity(self) -> Arity {
        match self {
            Op::IsNull | Op::NotNull | Op::IsNan | Op::NotNan => Arity::Unary,
            Op::In | Op::NotIn => Arity::Set,
            _ => Arity::Literal,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Unary,
    Literal,
    Set,
}

/// What a leaf is about.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Name(String),
    Id(i32),
    /// A transform or function application: not evaluated.
    Opaque,
}

/// The filter as parsed, before binding.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    True,
    False,
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Leaf {
        op: Op,
        term: Term,
        values: Vec<Value>,
    },
}

fn bad(message: impl std::fmt::Display) -> CatalogError {
    CatalogError::BadRequest(format!("Invalid filter: {message}"))
}

/// A filter parsed from a request (an absent filter is `true`).
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    expr: Expr,
}

impl Filter {
    pub fn parse(json: Option<&Value>) -> Result<Filter, CatalogError> {
        let Some(json) = json else {
            return Ok(Filter { expr: Expr::True });
        };
        if json.to_string().len() > MAX_FILTER_BYTES {
            return Err(bad(format!("larger than {MAX_FILTER_BYTES} bytes")));
        }
        Ok(Filter {
            expr: parse_expr(json, 0)?,
        })
    }

    /// Whether the filter is `true` (every file matches).
    pub fn is_true(&self) -> bool {
        self.expr == Expr::True
    }

    /// The filter in the term form every client reads (for a task's `residual-filter`).
    pub fn to_term_json(&self, schema: &Schema) -> Value {
        term_json(&self.expr, schema)
    }

    /// The filter bound to `schema`, negations pushed to the leaves, literals coerced.
    pub fn bind(
        &self,
        schema: &SchemaRef,
        case_sensitive: bool,
    ) -> Result<BoundPredicate, CatalogError> {
        let predicate = to_predicate(&push_not(&self.expr, false), schema, case_sensitive)?;
        predicate
            .bind(schema.clone(), case_sensitive)
            .map_err(|e| bad(e.message()))
    }
}

const MAX_DEPTH: usize = 64;

fn parse_expr(json: &Value, depth: usize) -> Result<Expr, CatalogError> {
    if depth > MAX_DEPTH {
        return Err(bad("nested too deeply"));
    }
    let object = match json {
        Value::Bool(true) => return Ok(Expr::True),
        Value::Bool(false) => return Ok(Expr::False),
        Value::Object(object) => object,
        other => return Err(bad(format!("expected an expression, got {other}"))),
    };
    let kind = object
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("an expression without a type"))?;
    let child = |name: &str| -> Result<Expr, CatalogError> {
        let value = object
            .get(name)
            .ok_or_else(|| bad(format!("'{kind}' without '{name}'")))?;
        parse_expr(value, depth + 1)
    };
    match kind {
        "true" => Ok(Expr::True),
        "false" => Ok(Expr::False),
        "and" => Ok(Expr::And(
            Box::new(child("left")?),
            Box::new(child("right")?),
        )),
        "or" => Ok(Expr::Or(
            Box::new(child("left")?),
            Box::new(child("right")?),
        )),
        "not" => Ok(Expr::Not(Box::new(child("child")?))),
        other => {
            let op = Op::parse(other).ok_or_else(|| bad(format!("unknown type '{other}'")))?;
            parse_leaf(op, object)
        }
    }
}

fn parse_leaf(op: Op, object: &serde_json::Map<String, Value>) -> Result<Expr, CatalogError> {
    let leaf = |op: Op, term: Term, values: Vec<Value>| Expr::Leaf { op, term, values };
    match op.arity() {
        Arity::Unary => {
            let term = match (object.get("term"), object.get("child")) {
                (Some(term), _) => parse_term(term)?,
                (None, Some(child)) => parse_reference(child)?,
                (None, None) => return Err(bad(format!("'{}' without a term", op.name()))),
            };
            Ok(leaf(op, term, Vec::new()))
        }
        Arity::Set => {
            let term = match (object.get("term"), object.get("child")) {
                (Some(term), _) => parse_term(term)?,
                (None, Some(child)) => parse_reference(child)?,
                (None, None) => return Err(bad(format!("'{}' without a term", op.name()))),
            };
            let values = match object.get("values") {
                Some(Value::Array(values)) => {
                    values.iter().map(literal).collect::<Result<_, _>>()?
                }
                Some(Value::Object(literals)) => match literals.get("values") {
                    Some(Value::Array(values)) => {
                        values.iter().map(literal).collect::<Result<_, _>>()?
                    }
                    _ => return Err(bad(format!("'{}' without values", op.name()))),
                },
                _ => return Err(bad(format!("'{}' without values", op.name()))),
            };
            Ok(leaf(op, term, values))
        }
        Arity::Literal => {
            if let Some(term) = object.get("term") {
                let value = object
                    .get("value")
                    .ok_or_else(|| bad(format!("'{}' without a value", op.name())))?;
                return Ok(leaf(op, parse_term(term)?, vec![literal(value)?]));
            }
            let (Some(left), Some(right)) = (object.get("left"), object.get("right")) else {
                return Err(bad(format!("'{}' without operands", op.name())));
            };
            if is_reference(left) {
                Ok(leaf(op, parse_reference(left)?, vec![literal(right)?]))
            } else if is_reference(right) {
                let flipped = op.flipped().ok_or_else(|| {
                    bad(format!("'{}' with the reference on the right", op.name()))
                })?;
                Ok(leaf(flipped, parse_reference(right)?, vec![literal(left)?]))
            } else if is_apply(left) || is_apply(right) {
                Ok(leaf(op, Term::Opaque, Vec::new()))
            } else {
                Err(bad(format!("'{}' compares no column", op.name())))
            }
        }
    }
}

fn is_reference(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) == Some("reference")
}

fn is_apply(value: &Value) -> bool {
    matches!(
        value.get("type").and_then(Value::as_str),
        Some("apply" | "transform")
    )
}

/// A term of the term form: a column name, a reference object, or a transform.
fn parse_term(term: &Value) -> Result<Term, CatalogError> {
    match term {
        Value::String(name) => Ok(Term::Name(name.clone())),
        Value::Object(_) if is_apply(term) => Ok(Term::Opaque),
        Value::Object(_) => parse_reference(term),
        other => Err(bad(format!("invalid term {other}"))),
    }
}

/// A reference of the 1.12 form (`name` or `id`), or Java's `term`.
fn parse_reference(value: &Value) -> Result<Term, CatalogError> {
    if is_apply(value) {
        return Ok(Term::Opaque);
    }
    if let Value::String(name) = value {
        return Ok(Term::Name(name.clone()));
    }
    if !is_reference(value) {
        return Err(bad(format!("expected a reference, got {value}")));
    }
    if let Some(name) = value
        .get("name")
        .or_else(|| value.get("term"))
        .and_then(Value::as_str)
    {
        return Ok(Term::Name(name.to_owned()));
    }
    match value.get("id").and_then(Value::as_i64).map(i32::try_from) {
        Some(Ok(id)) => Ok(Term::Id(id)),
        _ => Err(bad(format!("a reference without a name or id: {value}"))),
    }
}

/// A literal: bare, or `{"type": "literal", "value": ...}`.
fn literal(value: &Value) -> Result<Value, CatalogError> {
    match value {
        Value::Object(object) if object.get("type").and_then(Value::as_str) == Some("literal") => {
            object
                .get("value")
                .cloned()
                .ok_or_else(|| bad("a literal without a value"))
        }
        Value::Object(_) | Value::Array(_) => Err(bad(format!("invalid literal {value}"))),
        other => Ok(other.clone()),
    }
}

/// `expr` with every `not` pushed to the leaves (`negate`: under an odd number of them).
fn push_not(expr: &Expr, negate: bool) -> Expr {
    match (expr, negate) {
        (Expr::True, false) | (Expr::False, true) => Expr::True,
        (Expr::True, true) | (Expr::False, false) => Expr::False,
        (Expr::Not(child), _) => push_not(child, !negate),
        (Expr::And(l, r), false) => {
            Expr::And(Box::new(push_not(l, false)), Box::new(push_not(r, false)))
        }
        (Expr::Or(l, r), false) => {
            Expr::Or(Box::new(push_not(l, false)), Box::new(push_not(r, false)))
        }
        (Expr::And(l, r), true) => {
            Expr::Or(Box::new(push_not(l, true)), Box::new(push_not(r, true)))
        }
        (Expr::Or(l, r), true) => {
            Expr::And(Box::new(push_not(l, true)), Box::new(push_not(r, true)))
        }
        (Expr::Leaf { op, term, values }, negate) => Expr::Leaf {
            op: if negate { op.negated() } else { *op },
            term: term.clone(),
            values: values.clone(),
        },
    }
}

/// The column a leaf names, as the schema spells it.
fn column<'a>(
    term: &Term,
    schema: &'a Schema,
    case_sensitive: bool,
) -> Result<Option<(String, &'a iceberg::spec::NestedFieldRef)>, CatalogError> {
    let field = match term {
        Term::Opaque => return Ok(None),
        Term::Id(id) => schema.field_by_id(*id),
        Term::Name(name) if case_sensitive => schema.field_by_name(name),
        Term::Name(name) => schema.field_by_name_case_insensitive(name),
    };
    let field = field.ok_or_else(|| match term {
        Term::Id(id) => bad(format!("no field with id {id}")),
        Term::Name(name) => bad(format!("cannot find field '{}'", name.escape_debug())),
        Term::Opaque => unreachable!("handled above"),
    })?;
    let name = schema
        .name_by_field_id(field.id)
        .ok_or_else(|| bad(format!("no name for field {}", field.id)))?;
    Ok(Some((name.to_owned(), field)))
}

/// A pushed-down tree as the crate's unbound predicate, literals coerced.
fn to_predicate(
    expr: &Expr,
    schema: &Schema,
    case_sensitive: bool,
) -> Result<Predicate, CatalogError> {
    Ok(match expr {
        Expr::True => Predicate::AlwaysTrue,
        Expr::False => Predicate::AlwaysFalse,
        Expr::And(l, r) => {
            to_predicate(l, schema, case_sensitive)?.and(to_predicate(r, schema, case_sensitive)?)
        }
        Expr::Or(l, r) => {
            to_predicate(l, schema, case_sensitive)?.or(to_predicate(r, schema, case_sensitive)?)
        }
        Expr::Not(_) => unreachable!("negations are pushed down first"),
        Expr::Leaf { op, term, values } => {
            let Some((name, field)) = column(term, schema, case_sensitive)? else {
                return Ok(Predicate::AlwaysTrue);
            };
            let Type::Primitive(ty) = field.field_type.as_ref() else {
                return Err(bad(format!("'{name}' is not a primitive column")));
            };
            let reference = Reference::new(name.clone());
            let datum = |value: &Value| coerce(value, ty, &name);
            match op {
                Op::IsNull => reference.is_null(),
                Op::NotNull => reference.is_not_null(),
                Op::IsNan => reference.is_nan(),
                Op::NotNan => reference.is_not_nan(),
                Op::Lt => reference.less_than(datum(&values[0])?),
                Op::LtEq => reference.less_than_or_equal_to(datum(&values[0])?),
                Op::Gt => reference.greater_than(datum(&values[0])?),
                Op::GtEq => reference.greater_than_or_equal_to(datum(&values[0])?),
                Op::Eq => reference.equal_to(datum(&values[0])?),
                Op::NotEq => reference.not_equal_to(datum(&values[0])?),
                Op::StartsWith => reference.starts_with(datum(&values[0])?),
                Op::NotStartsWith => reference.not_starts_with(datum(&values[0])?),
                Op::In if values.is_empty() => Predicate::AlwaysFalse,
                Op::NotIn if values.is_empty() => Predicate::AlwaysTrue,
                Op::In => reference.is_in(values.iter().map(datum).collect::<Result<Vec<_>, _>>()?),
                Op::NotIn => {
                    reference.is_not_in(values.iter().map(datum).collect::<Result<Vec<_>, _>>()?)
                }
            }
        }
    })
}

/// A JSON literal as a value of the column's type: the single-value JSON form, and the numbers
/// engines send for dates (days), times and timestamps (microseconds).
fn coerce(value: &Value, ty: &PrimitiveType, column: &str) -> Result<Datum, CatalogError> {
    let fail = || {
        bad(format!(
            "cannot read {value} as a value of {ty} column '{}'",
            column.escape_debug()
        ))
    };
    let number = value.as_i64();
    let text = value.as_str();
    let datum = match ty {
        PrimitiveType::Boolean => match (value.as_bool(), text) {
            (Some(b), _) => Datum::bool(b),
            (None, Some(t)) => Datum::bool_from_str(t).map_err(|_| fail())?,
            _ => return Err(fail()),
        },
        PrimitiveType::Int | PrimitiveType::Long => match (number, text) {
            (Some(n), _) => Datum::long(n),
            (None, Some(t)) => Datum::long(t.trim().parse::<i64>().map_err(|_| fail())?),
            _ => return Err(fail()),
        },
        PrimitiveType::Float | PrimitiveType::Double => match (value.as_f64(), text) {
            (Some(f), _) => Datum::double(f),
            (None, Some(t)) => Datum::double(parse_float(t).ok_or_else(fail)?),
            _ => return Err(fail()),
        },
        PrimitiveType::Decimal { .. } => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(fail()),
            };
            Datum::decimal_from_str(text.trim()).map_err(|_| fail())?
        }
        PrimitiveType::Date => match (number, text) {
            (Some(days), _) => Datum::date(i32::try_from(days).map_err(|_| fail())?),
            (None, Some(t)) => Datum::date_from_str(t).map_err(|_| fail())?,
            _ => return Err(fail()),
        },
        PrimitiveType::Time => match (number, text) {
            (Some(micros), _) => Datum::time_micros(micros).map_err(|_| fail())?,
            (None, Some(t)) => Datum::time_from_str(t).map_err(|_| fail())?,
            _ => return Err(fail()),
        },
        PrimitiveType::Timestamp | PrimitiveType::TimestampNs => match (number, text) {
            (Some(n), _) if *ty == PrimitiveType::Timestamp => Datum::timestamp_micros(n),
            (Some(n), _) => Datum::timestamp_nanos(n),
            (None, Some(t)) => Datum::timestamp_from_str(t).map_err(|_| fail())?,
            _ => return Err(fail()),
        },
        PrimitiveType::Timestamptz | PrimitiveType::TimestamptzNs => match (number, text) {
            (Some(n), _) if *ty == PrimitiveType::Timestamptz => Datum::timestamptz_micros(n),
            (Some(n), _) => Datum::timestamptz_nanos(n),
            (None, Some(t)) => Datum::timestamptz_from_str(t).map_err(|_| fail())?,
            _ => return Err(fail()),
        },
        PrimitiveType::String => Datum::string(text.ok_or_else(fail)?),
        PrimitiveType::Uuid => Datum::uuid_from_str(text.ok_or_else(fail)?).map_err(|_| fail())?,
        PrimitiveType::Fixed(_) => {
            Datum::fixed(hex::decode(text.ok_or_else(fail)?).map_err(|_| fail())?)
        }
        PrimitiveType::Binary => {
            Datum::binary(hex::decode(text.ok_or_else(fail)?).map_err(|_| fail())?)
        }
    };
    datum.to(&Type::Primitive(ty.clone())).map_err(|_| fail())
}

fn parse_float(text: &str) -> Option<f64> {
    match text.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

/// The term form of `expr`, references by name (ids resolved through `schema`).
fn term_json(expr: &Expr, schema: &Schema) -> Value {
    match expr {
        Expr::True => Value::Bool(true),
        Expr::False => Value::Bool(false),
        Expr::And(l, r) => {
            json!({"type": "and", "left": term_json(l, schema), "right": term_json(r, schema)})
        }
        Expr::Or(l, r) => {
            json!({"type": "or", "left": term_json(l, schema), "right": term_json(r, schema)})
        }
        Expr::Not(child) => json!({"type": "not", "child": term_json(child, schema)}),
        Expr::Leaf { op, term, values } => {
            let term = match term {
                Term::Name(name) => Value::String(name.clone()),
                Term::Id(id) => schema
                    .name_by_field_id(*id)
                    .map_or(Value::Null, |n| Value::String(n.to_owned())),
                // Not evaluated by Floe: the client's own filter applies (no residual).
                Term::Opaque => return Value::Bool(true),
            };
            match op.arity() {
                Arity::Unary => json!({"type": op.name(), "term": term}),
                Arity::Literal => json!({"type": op.name(), "term": term, "value": values[0]}),
                Arity::Set => json!({"type": op.name(), "term": term, "values": values}),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{NestedField, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(
            Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                    NestedField::optional(2, "day", Type::Primitive(PrimitiveType::Date)).into(),
                    NestedField::optional(3, "Name", Type::Primitive(PrimitiveType::String)).into(),
                    NestedField::optional(4, "ts", Type::Primitive(PrimitiveType::Timestamp))
                        .into(),
                ])
                .build()
                .unwrap(),
        )
    }

    fn bound(json: Value) -> String {
        Filter::parse(Some(&json))
            .unwrap()
            .bind(&schema(), false)
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_term_form_and_the_new_form_bind_alike() {
        let old = bound(json!({"type": "lt", "term": "id", "value": 5}));
        let new =
            bound(json!({"type": "lt", "left": {"type": "reference", "name": "id"}, "right": 5}));
        let by_id = bound(
            json!({"type": "lt", "left": {"type": "reference", "id": 1}, "right": {"type": "literal", "value": 5}}),
        );
        let flipped =
            bound(json!({"type": "gt", "left": 5, "right": {"type": "reference", "name": "id"}}));
        assert_eq!(old, new);
        assert_eq!(old, by_id);
        assert_eq!(old, flipped);
    }

    #[test]
    fn dates_and_timestamps_come_as_text_or_numbers() {
        assert_eq!(
            bound(json!({"type": "eq", "term": "day", "value": "2024-01-02"})),
            bound(json!({"type": "eq", "term": "day", "value": 19724}))
        );
        assert_eq!(
            bound(json!({"type": "gt", "term": "ts", "value": "1970-01-01T00:00:01"})),
            bound(json!({"type": "gt", "term": "ts", "value": 1_000_000}))
        );
    }

    #[test]
    fn negations_reach_the_leaves_and_opaque_leaves_never_exclude() {
        let not_lt =
            bound(json!({"type": "not", "child": {"type": "lt", "term": "id", "value": 5}}));
        assert_eq!(
            not_lt,
            bound(json!({"type": "gt-eq", "term": "id", "value": 5}))
        );
        // NOT(bucket(id) = 3): nothing is known, so every file may match.
        let opaque = json!({"type": "not", "child": {"type": "eq",
            "term": {"type": "transform", "transform": "bucket[16]", "term": "id"}, "value": 3}});
        assert_eq!(bound(opaque), "True");
    }

    #[test]
    fn names_follow_case_sensitivity_and_bad_input_is_a_400() {
        let f = Filter::parse(Some(&json!({"type": "eq", "term": "name", "value": "x"}))).unwrap();
        assert!(f.bind(&schema(), false).is_ok());
        assert!(matches!(
            f.bind(&schema(), true),
            Err(CatalogError::BadRequest(_))
        ));
        for bad in [
            json!({"type": "lt", "term": "id", "value": "five"}),
            json!({"type": "bogus"}),
            json!({"type": "lt", "term": "id"}),
            json!(3),
        ] {
            let parsed = Filter::parse(Some(&bad)).and_then(|f| f.bind(&schema(), true));
            assert!(matches!(parsed, Err(CatalogError::BadRequest(_))), "{bad}");
        }
    }

    #[test]
    fn the_residual_is_written_in_the_term_form() {
        let f = Filter::parse(Some(
            &json!({"type": "lt", "left": {"type": "reference", "id": 1}, "right": 5}),
        ))
        .unwrap();
        assert_eq!(
            f.to_term_json(&schema()),
            json!({"type": "lt", "term": "id", "value": 5})
        );
    }
}
