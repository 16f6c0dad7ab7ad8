//! Diagnostics: every problem the compiler finds, with a stable code, a severity, labels on
//! exact spans and help. Each stage appends to one list; the command line renders it.

use std::fmt;

use crate::source::{Sources, Span};

macro_rules! codes {
    ($($variant:ident = $code:literal, $summary:literal;)*) => {
        /// The stable code of a diagnostic, `allot::<area>::<name>`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $($variant),* }

        impl Code {
            /// Every code, in documentation order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code),* }
            }

            /// One line saying what the code means.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary),* }
            }
        }
    };
}

codes! {
    SyntaxKdl = "allot::syntax::kdl", "the file is not valid KDL 2.0";
    SyntaxKdlV1 = "allot::syntax::kdl-v1", "KDL 1 syntax (`true`, `false`, `null`) in a KDL 2.0 file";
    SyntaxUnknownNode = "allot::syntax::unknown-node", "a node allot does not know at this place";
    SyntaxUnknownProperty = "allot::syntax::unknown-property", "a property this node does not take";
    SyntaxMissingValue = "allot::syntax::missing-value", "a required argument or property is missing";
    SyntaxWrongType = "allot::syntax::wrong-type", "a value of the wrong type (a string for a count, ...)";
    SyntaxExtraArgument = "allot::syntax::extra-argument", "more arguments than the node takes";
    SyntaxDuplicateProperty = "allot::syntax::duplicate-property", "the same property twice on one node";
    SyntaxDuplicateNode = "allot::syntax::duplicate-node", "a node allowed once appears again";
    ValueBadDuration = "allot::value::bad-duration", "a duration that does not parse";
    ValueBadPercentage = "allot::value::bad-percentage", "a percentage that does not parse";
    ValueBadDate = "allot::value::bad-date", "a date that does not parse (neither a date nor an RFC 3339 time with its offset)";
    ValueOutOfRange = "allot::value::out-of-range", "a number outside its allowed range";
    ValueBadChoice = "allot::value::bad-choice", "a value that is not one of the allowed words";
    NameDuplicate = "allot::name::duplicate", "two siblings (or two clusters, two contracts) share a name";
    NameUnportable = "allot::name::unportable", "a name that some target cannot carry";
    NameReserved = "allot::name::reserved", "a name a target reserves (`root`), or the user `root` in a project";
    NameInvalid = "allot::name::invalid", "a value one scheduler reads (Slurm cluster or partition, GPU type, Kubernetes flavor, resource or node label, YARN resource, owner) outside that scheduler's syntax";
    ShareOvercommit = "allot::share::overcommit", "sibling percentages sum over 100%";
    ShareMixed = "allot::share::mixed", "percentages and weights mixed among siblings";
    ShareNonPositive = "allot::share::non-positive", "a share of zero or less";
    GrantAmount = "allot::grant::amount", "a grant gives neither or both of `share` and `guaranteed-gpus`";
    GrantDates = "allot::grant::dates", "a grant ends before it starts, or when it starts";
    GrantExpired = "allot::grant::expired", "a grant that has ended";
    GrantTooLong = "allot::grant::too-long", "a grant lasting longer than the policy's `max-grant`";
    GrantCluster = "allot::grant::cluster", "a grant's cluster is one the project may not use, or a GPU grant names none where the project uses several";
    GrantOvercommit = "allot::grant::overcommit", "grants that take a parent's shares beyond 100% at some date";
    ReferenceUnknownContract = "allot::reference::unknown-contract", "a contract name that is not defined";
    ReferenceUnknownCluster = "allot::reference::unknown-cluster", "a cluster name that is not defined";
    ClusterMissing = "allot::cluster::missing", "no cluster is defined";
    ClusterPartialNode = "allot::cluster::partial-node", "the GPU count is not a multiple of the GPUs per node";
    ContractNoDefault = "allot::contract::no-default", "no contract is the default";
    ContractMultipleDefaults = "allot::contract::multiple-defaults", "more than one contract is the default";
    ContractMinAboveMax = "allot::contract::min-above-max", "a contract's minimum runtime exceeds its maximum";
    ContractReserveTooLarge = "allot::contract::reserve-too-large", "the contracts' reserves hold all of a cluster's GPUs";
    LimitAboveCluster = "allot::limit::above-cluster", "a project's max GPUs exceed every cluster it may use";
    LimitAboveParent = "allot::limit::above-parent", "a project's max GPUs exceed its parent's";
    IncludeCycle = "allot::include::cycle", "files include each other in a cycle";
    IncludeMissing = "allot::include::missing", "an included file does not exist or cannot be read";
    IncludeDuplicate = "allot::include::duplicate", "a file is included more than once";
    IncludeOutside = "allot::include::outside", "an include path is absolute or leaves the repository";
    MemberNoDefault = "allot::member::no-default", "a user is in several projects and none is the default";
    MemberConflictingDefault = "allot::member::conflicting-default", "a user has more than one default project";
    SizeFileTooLarge = "allot::size::file-too-large", "a file is larger than allot reads";
    SizeTooDeep = "allot::size::too-deep", "nesting deeper than allot reads";
    SizeTooManyFiles = "allot::size::too-many-files", "more included files than allot reads";
    SourceUnreadable = "allot::source::unreadable", "a file cannot be read or is not UTF-8";
    OwnerInvalid = "allot::owner::invalid", "an owner that is not a GitHub handle or an e-mail address";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// A text attached to a span; the first label of a diagnostic is its primary one.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    /// Labels in one file; the first one is where the problem is.
    pub labels: Vec<Label>,
    pub help: Option<String>,
    /// For problems outside any file's text (an unreadable file): the file's name.
    pub file_name: Option<String>,
}

impl Diagnostic {
    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            message: message.into(),
            labels: Vec::new(),
            help: None,
            file_name: None,
        }
    }

    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message) }
    }

    /// Adds a label; the first is the primary one. Labels in another file than the
    /// primary's are rendered as notes (miette draws one file per diagnostic).
    pub fn label(mut self, span: Span, text: impl Into<String>) -> Self {
        self.labels.push(Label { span, text: text.into() });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn primary_span(&self) -> Option<Span> {
        self.labels.first().map(|l| l.span)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The file name diagnostics renderers show.
    pub fn file_name<'a>(&'a self, sources: &'a Sources) -> Option<&'a str> {
        match self.primary_span() {
            Some(span) => sources.get(span.file).map(|f| f.name.as_str()),
            None => self.file_name.as_deref(),
        }
    }

    /// Binds the diagnostic to its source text so that miette can render it.
    pub fn with_sources<'a>(&'a self, sources: &'a Sources) -> SourcedDiagnostic<'a> {
        let primary = self.primary_span().map(|s| s.file);
        let source = primary.and_then(|file| sources.get(file)).map(|file| {
            miette::NamedSource::new(file.name.clone(), file.text.to_string()).with_language("kdl")
        });
        let notes: Vec<String> = self
            .labels
            .iter()
            .filter(|l| Some(l.span.file) != primary)
            .filter_map(|l| {
                let (file, at) = sources.location(l.span)?;
                Some(format!("{}:{}:{}: {}", file.name, at.line, at.column, l.text))
            })
            .collect();
        let help = match (&self.help, notes.is_empty()) {
            (help, true) => help.clone(),
            (Some(help), false) => Some(format!("{help}\n{}", notes.join("\n"))),
            (None, false) => Some(notes.join("\n")),
        };
        SourcedDiagnostic { diagnostic: self, source, help }
    }
}

/// A diagnostic with its file, implementing [`miette::Diagnostic`].
#[derive(Debug)]
pub struct SourcedDiagnostic<'a> {
    diagnostic: &'a Diagnostic,
    source: Option<miette::NamedSource<String>>,
    /// The help, followed by the labels in other files.
    help: Option<String>,
}

impl fmt::Display for SourcedDiagnostic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.source, &self.diagnostic.file_name) {
            (None, Some(name)) => write!(f, "{}: {}", name, self.diagnostic.message),
            _ => f.write_str(&self.diagnostic.message),
        }
    }
}

impl std::error::Error for SourcedDiagnostic<'_> {}

impl miette::Diagnostic for SourcedDiagnostic<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.source.as_ref()?;
        let primary = self.diagnostic.primary_span().map(|s| s.file);
        let here = self.diagnostic.labels.iter().filter(move |l| Some(l.span.file) == primary);
        let labels = here.enumerate().map(|(i, label)| {
            let text = (!label.text.is_empty()).then(|| label.text.clone());
            if i == 0 {
                miette::LabeledSpan::new_primary_with_span(text, label.span.source_span())
            } else {
                miette::LabeledSpan::new_with_span(text, label.span.source_span())
            }
        });
        Some(Box::new(labels))
    }
}

/// "did you mean `x`?" for the closest known word, if one is close enough.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(word, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!("did you mean `{k}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            let parts: Vec<&str> = s.split("::").collect();
            assert_eq!(parts.len(), 3, "{s}");
            assert_eq!(parts[0], "allot");
        }
    }

    #[test]
    fn suggestions_pick_close_words_only() {
        assert_eq!(did_you_mean("projct", ["project", "policy"]).as_deref(), Some("did you mean `project`?"));
        assert_eq!(did_you_mean("zzz", ["project", "policy"]), None);
    }
}
