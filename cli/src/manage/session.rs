//! One management command's connection and output form, shared by every command module.

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use super::client::Client;
use super::{Connection, EXIT_SERVER, Failure};

/// A client and the output form chosen for one command.
pub(super) struct Session {
    client: Client,
    pub(super) json: bool,
}

impl Session {
    pub(super) fn open(connection: &Connection) -> Result<Self, Failure> {
        Ok(Session {
            client: connection.client()?,
            json: connection.json,
        })
    }

    pub(super) async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Result<Bytes, Failure> {
        self.client.call(method, segments, query, body).await
    }

    pub(super) async fn call_iceberg(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> Result<Bytes, Failure> {
        self.client.call_iceberg(method, segments, body).await
    }

    /// Prints an answer with a body: exactly as received with `--json`, else rendered.
    pub(super) fn show(
        &self,
        answer: &Bytes,
        render: impl FnOnce(&Value) -> String,
    ) -> Result<(), Failure> {
        if self.json {
            print_raw(answer);
            return Ok(());
        }
        println!("{}", render(&parse(answer)?));
        Ok(())
    }

    /// Confirms an empty answer; `--json` prints nothing, since the API sent nothing.
    pub(super) fn done(&self, message: String) {
        if !self.json {
            println!("{message}");
        }
    }
}

pub(super) fn print_raw(answer: &Bytes) {
    let text = String::from_utf8_lossy(answer);
    if text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
}

pub(super) fn parse(answer: &Bytes) -> Result<Value, Failure> {
    serde_json::from_slice(answer).map_err(|e| {
        Failure::new(
            EXIT_SERVER,
            format!("the server's answer is not the JSON the API documents: {e}"),
        )
    })
}
