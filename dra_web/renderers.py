"""The API's JSON renderer: what DRF renders, except that a string holding a lone UTF-16
surrogate (quoted back from a refused upload, say) is written as its JSON escape instead of
failing the response with a 500."""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer


class SafeJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            # ASCII output escapes every non-ASCII character, lone surrogates included
            # (\ud800): valid JSON that a client decodes back to the same string.
            self.ensure_ascii = True
            return super().render(data, accepted_media_type, renderer_context)
