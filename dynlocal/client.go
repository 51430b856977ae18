package dynlocal

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Region is the region of the clients Client and StreamsClient return. DynamoDB Local
// started with -sharedDb (as Start does) keeps one database whatever the region, but the
// SDK needs one to sign.
const Region = "us-east-1"

// credentialsLocal are the static credentials of every local client: DynamoDB Local
// accepts any, and nothing is read from the environment's AWS configuration.
var credentialsLocal = credentials.NewStaticCredentialsProvider("local", "local", "")

// Client returns a DynamoDB client for the DynamoDB Local at endpoint (a base URL such as
// Server.Endpoint's "http://127.0.0.1:8000"), with static credentials and Region. optFns
// adjust it (retryer, HTTP client, middleware). It is the one way the gateway, its tests,
// its scripts and the bench reach a local engine.
func Client(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: credentialsLocal}, optFns...)
}

// StreamsClient returns a DynamoDB Streams client for the DynamoDB Local at endpoint
// (it serves Streams on the same endpoint), configured as Client's.
func StreamsClient(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: credentialsLocal}, optFns...)
}
