//! Rewriting a tree in place: [`VisitorMut`], the [`super::visit::Visitor`] trait over `&mut`
//! references, with its own `walk_*` functions and [`Field`].
//!
//! Generated from the same description as the shared-reference visitor, so the two walk the
//! same nodes in the same order.

use super::*;

super::visit::visitor!(VisitorMut, as_mut, mut);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;
    use crate::span::FileId;

    /// Renames every identifier, wherever it stands.
    struct Shout;

    impl VisitorMut for Shout {
        fn visit_ident(&mut self, ident: &mut Ident) {
            ident.name = ident.name.to_uppercase();
        }
    }

    /// Sets every span it is shown to the default.
    struct Zero;

    impl VisitorMut for Zero {
        fn visit_span(&mut self, span: &mut Span) {
            *span = Span::default();
        }
    }

    /// One of every kind of node, with a comment.
    const ALL_KINDS: &str = "# every kind\n\
        backend b { url = \"u\" catalog = \"c\" api_key = env(\"K\") timeout = 5s simulated = true api = anthropic }\n\
        model m { backend = b serves = \"s\" aliases = [\"a\"] cost = 1 context = 8k tokenizer = \"t\" }\n\
        classifier c { path = \"p\" labels = [x, y] device = cpu }\n\
        guard g { path = \"p\" positive = x device = auto }\n\
        encoder e { path = \"p\" device = cuda }\n\
        detector d { path = \"p\" entities = [X, Y] threshold = 0.5 device = cpu window = 64 windows = 4 }\n\
        signal s = not (c(prompt) in [x, y]) or -a.b * 2 > 1 and f(\"q\", [1, true], 2s) ?? c(prompt) is x\n\
        block k { when s status = 403 message = \"no\" }\n\
        block j { when s to m }\n\
        route r priority 1 { when s to m else m system_prompt = replace \"p\" \
          headers { \"h\" = \"v\" } reasoning = low tools = only [\"t\"] cache = off }\n\
        cache { encoder = e threshold = 0.9 ttl = 1h store = redis(\"redis://x\") skip when s }\n\
        session { id = header(\"i\") tenant = header(\"t\") ttl = 1m store = memory missing = reject }\n\
        protect { mode = observe hold \"h\" when s }\n\
        failure { classifier = open store = closed backend = open }\n\
        router { names = [\"auto\"] tokenizer = \"t\" anonymous = share }\n\
        test t { prompt = \"p\" system = \"s\" header \"h\" = \"v\" given s = true expect r model m }\n\
        test u { messages = \"m.json\" expect blocked k }\n";

    #[test]
    fn reaches_every_span() {
        let parsed = parse(ALL_KINDS, FileId(0));
        assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
        let formatted = crate::format::format_file(&parsed.file, ALL_KINDS);
        let mut before = parsed.file;
        let mut after = parse(&formatted, FileId(0)).file;
        assert_ne!(before, after, "the layout differs, so must the spans");
        Zero.visit_file(&mut before);
        Zero.visit_file(&mut after);
        assert_eq!(before, after, "a span was not visited");
    }

    #[test]
    fn reaches_every_identifier() {
        let text = "signal s = f(a).b is c\nroute r { when s to m else n }\n";
        let mut file = parse(text, FileId(0)).file;
        Shout.visit_file(&mut file);
        let want = "signal S = F(A).B is C\nroute R { when S to M else N }\n";
        let expected = parse(want, FileId(0)).file;
        assert!(file.eq_shape(&expected), "{file:#?}");
    }
}
