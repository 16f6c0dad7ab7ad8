//! GitHub workflow commands: `::error file=F,line=L,col=C,title=T::message`, the
//! annotations a GitHub Actions runner shows on the lines of a pull request. Both property
//! values and the message are escaped as the runner reads them, so text from a budget file
//! cannot end the command or start another.

/// One annotation: its level (`error`, `warning`, `notice`), its properties in order and
/// its message.
pub fn annotation(level: &str, properties: &[(&str, String)], message: &str) -> String {
    let properties: Vec<String> =
        properties.iter().map(|(key, value)| format!("{key}={}", escape_property(value))).collect();
    format!("::{level} {}::{}", properties.join(","), escape_data(message))
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
