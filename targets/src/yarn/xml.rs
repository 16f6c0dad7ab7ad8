//! A small element tree for Hadoop's XML files: written with quick-xml (which does the
//! escaping) in a fixed layout, and read for Hadoop's own files and the tests, which show
//! that what allot writes reads back as the elements it checked.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

/// An XML element: attributes, text as written, child elements (comments are not kept).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Element {
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    pub fn new(name: &str) -> Element {
        Element { name: name.to_string(), ..Element::default() }
    }

    /// `<name>text</name>`
    pub fn text(name: &str, text: impl Into<String>) -> Element {
        Element { name: name.to_string(), text: text.into(), ..Element::default() }
    }

    pub fn attribute(mut self, key: &str, value: impl Into<String>) -> Element {
        self.attributes.push((key.to_string(), value.into()));
        self
    }

    pub fn child(mut self, child: Element) -> Element {
        self.children.push(child);
        self
    }

    pub fn get_attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The text of the first child element named `name`.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.children.iter().find(|c| c.name == name).map(|c| c.text.as_str())
    }
}

/// The document as text: an XML declaration, an optional comment, the element indented by
/// two spaces, a final newline.
pub fn write(root: &Element, comment: Option<&str>) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing into a Vec cannot fail.
    let _ = writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    if let Some(comment) = comment {
        // A comment ends at `--`; it stays on one line and cannot close early.
        let mut text = crate::text::comment(comment);
        while text.contains("--") {
            text = text.replace("--", "- -");
        }
        let _ = writer.write_event(Event::Comment(BytesText::from_escaped(format!(" {text} "))));
    }
    let _ = write_element(&mut writer, root);
    let mut text = String::from_utf8(writer.into_inner()).unwrap_or_default();
    text.push('\n');
    text
}

fn write_element(writer: &mut Writer<Vec<u8>>, element: &Element) -> std::io::Result<()> {
    let attributes = element.attributes.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let start = writer.create_element(element.name.as_str()).with_attributes(attributes);
    if !element.children.is_empty() {
        start.write_inner_content(|w| element.children.iter().try_for_each(|c| write_element(w, c)))?;
    } else if !element.text.is_empty() {
        start.write_text_content(BytesText::new(&element.text))?;
    } else {
        start.write_empty()?;
    }
    Ok(())
}

/// Why a document is not one this module reads.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not well-formed XML at byte {position}: {error}")]
    Malformed { position: u64, error: quick_xml::Error },
    #[error("a closing tag without an opening one")]
    UnopenedClose,
    #[error("unknown entity &{name}; at byte {position}")]
    UnknownEntity { name: String, position: u64 },
    #[error("the document ends inside an element")]
    Unclosed,
    #[error("no root element")]
    NoRoot,
    #[error("more than one root element")]
    SecondRoot,
    #[error("bad attribute: {0}")]
    Attribute(quick_xml::events::attributes::AttrError),
    #[error("bad attribute value: {0}")]
    AttributeValue(quick_xml::Error),
    #[error("the root element is <{0}>, not <configuration>")]
    NotConfiguration(String),
    #[error("a <property> without <name>")]
    UnnamedProperty,
}

/// Parses a document into its root element, or says what is wrong and where.
pub fn parse(text: &str) -> Result<Element, Error> {
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root = None;
    loop {
        let position = reader.buffer_position();
        let event = reader.read_event().map_err(|error| Error::Malformed { position, error })?;
        match event {
            Event::Start(start) => stack.push(open(&start)?),
            Event::Empty(start) => {
                let element = open(&start)?;
                close(element, &mut stack, &mut root)?;
            }
            Event::End(_) => {
                let element = stack.pop().ok_or(Error::UnopenedClose)?;
                close(element, &mut stack, &mut root)?;
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.into_inner());
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    if let Ok(Some(c)) = r.resolve_char_ref() {
                        top.text.push(c);
                        continue;
                    }
                    let name = r.into_inner();
                    top.text.push_str(match name.as_ref() {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        _ => return Err(Error::UnknownEntity { name: name.to_string(), position }),
                    });
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(Error::Unclosed);
    }
    root.ok_or(Error::NoRoot)
}

fn open(start: &quick_xml::events::BytesStart) -> Result<Element, Error> {
    let mut element = Element::new(start.name().as_ref());
    for attribute in start.attributes() {
        let attribute = attribute.map_err(Error::Attribute)?;
        let key = attribute.key.as_ref().to_string();
        let value =
            attribute.normalized_value(quick_xml::XmlVersion::Implicit1_0).map_err(Error::AttributeValue)?;
        element.attributes.push((key, value.into_owned()));
    }
    Ok(element)
}

fn close(element: Element, stack: &mut [Element], root: &mut Option<Element>) -> Result<(), Error> {
    match stack.last_mut() {
        Some(parent) => parent.children.push(element),
        None if root.is_none() => *root = Some(element),
        None => return Err(Error::SecondRoot),
    }
    Ok(())
}

/// A Hadoop `<configuration>` of `<property>` name/value pairs.
pub fn configuration(properties: &[(String, String)]) -> Element {
    properties.iter().fold(Element::new("configuration"), |c, (name, value)| {
        c.child(
            Element::new("property").child(Element::text("name", name)).child(Element::text("value", value)),
        )
    })
}

/// The name/value pairs of a `<configuration>`, names trimmed as Hadoop does; values as
/// written (an ACL of one blank means "nobody").
pub fn properties(root: &Element) -> Result<Vec<(String, String)>, Error> {
    if root.name != "configuration" {
        return Err(Error::NotConfiguration(root.name.clone()));
    }
    let mut out = Vec::new();
    for property in root.children.iter().filter(|c| c.name == "property") {
        let name = property.child_text("name").ok_or(Error::UnnamedProperty)?;
        let value = property.child_text("value").unwrap_or("");
        out.push((name.trim().to_string(), value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn writes_escaped_and_reads_back() {
        let properties = vec![("a.b".to_string(), "x & <y>".to_string()), ("c".to_string(), " ".to_string())];
        let text = write(&configuration(&properties), Some("made by a test"));
        assert!(text.contains("<value>x &amp; &lt;y&gt;</value>"), "{text}");
        let back = properties_of(&text);
        assert_eq!(back, properties);
    }

    fn properties_of(text: &str) -> Vec<(String, String)> {
        properties(&parse(text).unwrap()).unwrap()
    }

    #[test]
    fn comments_cannot_close_early() {
        let text = write(&configuration(&[]), Some("x ---><evil/><!-- \n"));
        let root = parse(&text).unwrap();
        assert!(root.children.is_empty(), "{text}");
        assert_eq!(text.matches("-->").count(), 1, "{text}");
    }

    #[test]
    fn malformed_documents_are_refused() {
        assert!(parse("<a><b></a>").is_err());
        assert!(parse("<a></a><b/>").is_err());
        assert!(parse("<a>").is_err());
        assert!(parse("").is_err());
    }

    /// Text XML 1.0 carries that is markup elsewhere: `&`, `<`, `]]>`, quotes, comments,
    /// entities written out, blanks, characters beyond ASCII.
    fn text() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "&",
            "&amp;",
            "&#10;",
            "<",
            ">",
            "]]>",
            "\"",
            "'",
            "--",
            "<!--",
            "-->",
            "<?x?>",
            "<a/>",
            " ",
            "*",
            "é",
            "日本",
            "🙂",
            "x",
            "yarn.io/gpu",
            "root._unbudgeted",
        ]);
        prop::collection::vec(pieces, 0..5).prop_map(|pieces| pieces.concat())
    }

    /// An element tree as the YARN target builds one: text only in leaves.
    fn element() -> impl Strategy<Value = Element> {
        let leaf =
            (text(), text()).prop_map(|(name, text)| Element::text("value", text).attribute("name", name));
        leaf.prop_recursive(3, 16, 4, |inner| {
            (text(), prop::collection::vec(inner, 1..4)).prop_map(|(name, children)| {
                children.into_iter().fold(Element::new("queue").attribute("name", name), Element::child)
            })
        })
    }

    /// The tree without the layout the writer adds: the blanks between child elements.
    fn without_layout(mut element: Element) -> Element {
        if !element.children.is_empty() {
            element.text.clear();
        }
        element.children = element.children.into_iter().map(without_layout).collect();
        element
    }

    proptest! {
        #[test]
        fn properties_read_back_as_written(
            properties in prop::collection::vec((text().prop_map(|t| format!("n{t}n")), text()), 0..5),
        ) {
            let text = write(&configuration(&properties), Some("a test"));
            prop_assert_eq!(properties_of(&text), properties);
        }

        #[test]
        fn elements_read_back_as_written(element in element()) {
            let text = write(&element, None);
            prop_assert_eq!(parse(&text).map(without_layout).ok(), Some(element));
        }
    }
}
