"""Platforms, tags, terms, users and the other entities assets refer to."""

from __future__ import annotations

from typing import Any

from standin.catalog import TYPES
from standin.entities.base import Json, Node, audit, custom_properties


class DataPlatform(Node):
    typename = "DataPlatform"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("platformName") or self.urn.rsplit(":", 1)[-1]

    def properties(self, _info: Any, **_: Any) -> Json:
        info = self._a("dataPlatformInfo") or {}
        return {
            "type": info.get("type") or "OTHERS",
            "displayName": info.get("displayName") or self.name(None),
            "datasetNameDelimiter": info.get("datasetNameDelimiter") or ".",
            "logoUrl": info.get("logoUrl"),
        }

    info = properties

    def displayName(self, _info: Any, **_: Any) -> str:
        return str(self.properties(None)["displayName"])


class DataPlatformInstance(Node):
    typename = "DataPlatformInstance"

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._key().get("platform")

    def instanceId(self, _info: Any, **_: Any) -> str:
        return str(self._key().get("instance") or "")


class DataTypeEntity(Node):
    typename = "DataTypeEntity"

    def info(self, _info: Any, **_: Any) -> Json:
        qualified = self.urn.rsplit(":", 1)[-1]  # urn:li:dataType:datahub.number
        short = qualified.rsplit(".", 1)[-1].upper()
        std = short if short in {"STRING", "NUMBER", "URN", "RICH_TEXT", "DATE"} else "OTHER"
        return {"type": std, "qualifiedName": qualified, "displayName": short.title()}


class EntityTypeEntity(Node):
    typename = "EntityTypeEntity"

    def info(self, _info: Any, **_: Any) -> Json:
        qualified = self.urn.rsplit(":", 1)[-1]  # urn:li:entityType:datahub.dataset
        name = qualified.rsplit(".", 1)[-1]
        return {
            "type": TYPES.get(name, ("", "OTHER"))[1],
            "qualifiedName": qualified,
            "displayName": name[:1].upper() + name[1:],
        }


class OwnershipTypeEntity(Node):
    typename = "OwnershipTypeEntity"

    def info(self, _info: Any, **_: Any) -> Json:
        value = self._a("ownershipTypeInfo") or {}
        name = self.urn.rsplit(":", 1)[-1].removeprefix("__system__")
        return {
            "name": value.get("name") or name,
            "description": value.get("description"),
            "created": audit(value.get("created")),
            "lastModified": audit(value.get("lastModified")),
        }


class Tag(Node):
    typename = "Tag"

    def name(self, _info: Any, **_: Any) -> str:
        props = self._a("tagProperties") or {}
        return props.get("name") or self._key().get("name") or self.urn.split(":", 3)[-1]

    def description(self, _info: Any, **_: Any) -> str | None:
        return (self._a("tagProperties") or {}).get("description")

    def properties(self, _info: Any, **_: Any) -> Json | None:
        props = self._a("tagProperties")
        if props is None:
            return None
        return {
            "name": props.get("name") or self.name(None),
            "description": props.get("description"),
            "colorHex": props.get("colorHex"),
        }


class GlossaryTerm(Node):
    typename = "GlossaryTerm"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn.split(":", 3)[-1]

    hierarchicalName = name

    def properties(self, _info: Any, **_: Any) -> Json | None:
        info = self._a("glossaryTermInfo")
        if info is None:
            return None
        return {
            "name": info.get("name") or self.name(None),
            "description": info.get("definition"),
            "definition": info.get("definition") or "",
            "termSource": info.get("termSource") or "INTERNAL",
            "sourceRef": info.get("sourceRef"),
            "sourceUrl": info.get("sourceUrl"),
            "rawSchema": info.get("rawSchema"),
            "customProperties": custom_properties(info.get("customProperties"), self.urn),
        }

    glossaryTermInfo = properties


class GlossaryNode(Node):
    typename = "GlossaryNode"

    def properties(self, _info: Any, **_: Any) -> Json | None:
        info = self._a("glossaryNodeInfo")
        if info is None:
            return None
        return {
            "name": info.get("name") or self.urn.split(":", 3)[-1],
            "description": info.get("definition"),
        }


class Domain(Node):
    typename = "Domain"

    def id(self, _info: Any, **_: Any) -> str:
        return self._key().get("id") or self.urn.split(":", 3)[-1]

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("domainProperties")
        if value is None:
            return None
        return {"name": value.get("name") or self.id(None), "description": value.get("description")}


class Container(Node):
    typename = "Container"

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn((self._a("dataPlatformInstance") or {}).get("platform"))

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("containerProperties")
        if value is None:
            return None
        return {
            "name": value.get("name") or "",
            "description": value.get("description"),
            "qualifiedName": value.get("qualifiedName"),
            "externalUrl": value.get("externalUrl"),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }


class CorpUser(Node):
    typename = "CorpUser"

    def username(self, _info: Any, **_: Any) -> str:
        return self._key().get("username") or self.urn.split(":", 3)[-1]

    def properties(self, _info: Any, **_: Any) -> Json | None:
        info = self._a("corpUserInfo")
        if info is None:
            return None
        return {
            "active": bool(info.get("active", True)),
            "displayName": info.get("displayName"),
            "email": info.get("email"),
            "title": info.get("title"),
            "firstName": info.get("firstName"),
            "lastName": info.get("lastName"),
            "fullName": info.get("fullName"),
            "manager": info.get("managerUrn"),
            "departmentId": info.get("departmentId"),
            "departmentName": info.get("departmentName"),
            "countryCode": info.get("countryCode"),
            "customProperties": custom_properties(info.get("customProperties"), self.urn),
        }

    info = properties

    def editableProperties(self, _info: Any, **_: Any) -> Json | None:
        # GMS's CorpUserEditableInfoMapper: the aspect's fields under their own names.
        value = self._a("corpUserEditableInfo")
        if value is None:
            return None
        fields = ("displayName", "title", "aboutMe", "teams", "skills", "pictureLink")
        return {k: value.get(k) for k in (*fields, "slack", "phone", "email")}

    editableInfo = editableProperties

    def isNativeUser(self, _info: Any, **_: Any) -> bool:
        return self._a("corpUserCredentials") is not None

    def settings(self, _info: Any, **_: Any) -> Json:
        return {"views": {"defaultView": None}}


class CorpGroup(Node):
    typename = "CorpGroup"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn.split(":", 3)[-1]

    def properties(self, _info: Any, **_: Any) -> Json | None:
        # GMS's CorpGroupPropertiesMapper (``info`` is the deprecated CorpGroupInfo: no slack).
        info = self._a("corpGroupInfo")
        if info is None:
            return None
        return {
            "displayName": info.get("displayName"),
            "description": info.get("description"),
            "email": info.get("email"),
            "slack": info.get("slack"),
        }

    info = properties

    def editableProperties(self, _info: Any, **_: Any) -> Json | None:
        # GMS's CorpGroupEditablePropertiesMapper.
        value = self._a("corpGroupEditableInfo")
        if value is None:
            return None
        return {k: value.get(k) for k in ("description", "slack", "email", "pictureLink")}
